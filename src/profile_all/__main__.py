from profile_all.entry import main

main()
