"""Big reply lines kept in files, not in memory: the spool the timing process writes and the pool reads.

An opening line is megabytes of base64 (a memory opening of 8 GPUs ~38 MB). The validator's timing
process (``compute.validator.session.clock_child``) writes such a line into a file of the spool
directory as its bytes arrive and hands the validator a ``SpooledLine`` (path and size) instead of
the bytes; a verification worker reads the file (``verify_lines``), and the validator deletes it when
the verdict is in, whatever happened. So no process holds a whole line it does not parse.

The spool directory is per timing process (``new_spool_dir``: in ``/dev/shm`` when there is one),
removed by whichever end goes last (the validator's ``Clock.close``, the timing process when its
validator goes away). This module only names and removes files: it does not parse anything.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

SHM = Path("/dev/shm")
SHM_MIN_FREE = 2 << 30  # a container's default /dev/shm (64 MB) would refuse the openings in flight


def spool_root() -> str | None:
    """Where temporary line files go: tmpfs when the machine has one with room for a round's openings
    in flight (``SHM_MIN_FREE``), else the default temp dir (disk-backed, through the page cache)."""
    try:
        stat = os.statvfs(SHM)
    except OSError:
        return None
    free = stat.f_bavail * stat.f_frsize
    return str(SHM) if free >= SHM_MIN_FREE and os.access(SHM, os.W_OK) else None


def new_spool_dir() -> str:
    """A fresh private directory for one timing process's line files."""
    return tempfile.mkdtemp(prefix="compute-spool-", dir=spool_root())


def remove_spool_dir(path: str) -> None:
    """Remove a spool directory and every file left in it (idempotent)."""
    shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class SpooledLine:
    """One reply line in a file: ``size`` bytes at ``path``, newline included. The holder deletes it."""

    path: str
    size: int

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        return Path(self.path).read_bytes()

    def discard(self) -> None:
        """Delete the file (idempotent)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


__all__ = ["SHM", "SHM_MIN_FREE", "SpooledLine", "new_spool_dir", "remove_spool_dir", "spool_root"]
