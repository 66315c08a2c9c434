VALUE = "imported from the script's folder"
