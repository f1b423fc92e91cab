"""The tests' fixed port ranges (41000-47999), moved apart per pytest-xdist worker.

``.ci/run`` runs the slow lane on several workers; each worker's ranges sit ``OFFSET`` above the
first's, so two tests picking "their" block at once never meet. Subprocesses inherit
``PYTEST_XDIST_WORKER`` and compute the same offset.
"""

from __future__ import annotations

import os

SPACING = 7000  # wider than every fixed range together (41000-47999); three workers fit below 65535


def worker_offset(environ: os._Environ[str] | dict[str, str] = os.environ) -> int:
    """0 on the first worker (or without xdist), ``SPACING`` on the second, twice it on the third."""
    digits = environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    return SPACING * (int(digits) % 3 if digits.isdigit() else 0)


OFFSET = worker_offset()
