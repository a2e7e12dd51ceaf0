"""``python -m hpcjobs``."""

from hpcjobs.cli import main

if __name__ == "__main__":
    main()
