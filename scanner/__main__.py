from cuda4amd.cli import main

if __name__ == "__main__":  # not when a worker process that was spawned imports this module
    main()
