"""Crash-safe file writes for everything the miner keeps on disk (lease state, host keys).

A file is written to a temporary sibling, flushed and fsync'd, then renamed over the target and
the directory fsync'd: after a ``kill -9`` or power loss a reader sees the old file or the new
one, never a truncated mix. Private material keeps mode 0600 from its first byte.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically (temp file + fsync + rename + directory fsync)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def fsync_dir(directory: str | Path) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temps(directory: str | Path) -> int:
    """Delete temporary files a killed writer left in ``directory``; returns how many."""
    removed = 0
    for leftover in Path(directory).glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
        removed += 1
    return removed


__all__ = ["fsync_dir", "remove_stale_temps", "write_atomic"]
