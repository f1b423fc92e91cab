"""Operator allocation client: ``python3 neurons/register.py COMMAND [flags]``.

Thin entry point; everything lives in ``compute.operator`` (see docs/register.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from compute.operator import main  # noqa: E402
except KeyboardInterrupt:  # Ctrl-C while the CLI loads (a second or two): nothing was sent yet
    print("interrupted", file=sys.stderr)
    sys.exit(130)

if __name__ == "__main__":
    sys.exit(main())
