"""The command line: the capture and translation (capture.py says what it prints)."""

from .capture import main

if __name__ == "__main__":
    main()
