"""``python -m compute.lab <name> [args]``: the same as ``python -m compute bench <name> [args]``."""

import sys

from compute.lab.cli import main

if __name__ == "__main__":
    sys.exit(main())
