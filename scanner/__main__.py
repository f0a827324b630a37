from cuda4amd.cli import main

main()
