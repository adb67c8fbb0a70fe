"""The command line: driver.py's (its header says what it runs and prints)."""

from .driver import main

if __name__ == "__main__":
    main()
