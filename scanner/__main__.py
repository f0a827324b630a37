from cuda4amd.cli import entry_point

if __name__ == "__main__":  # not when a worker process that was spawned imports this module
    entry_point()
