from profile_all.cli import main

main()
