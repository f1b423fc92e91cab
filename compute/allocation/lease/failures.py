"""Turn what a backend or the store raised into the answer a caller can act on.

A full disk is its own answer (HTTP 507, ``insufficient_storage``) wherever it shows up: an
``OSError`` with ``ENOSPC``/``EDQUOT``, SQLite's ``database or disk is full``, or Docker's
``no space left on device`` inside an API error. Anything else the backend raised is a 503
``backend_error``. What it deliberately does not do: roll anything back (the manager does).
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3

from compute.allocation.lease.backend import BackendError
from compute.allocation.lease.store import StoreError
from compute.protocol import ErrorCode, RequestFailed

BACKEND_TIMEOUT_S = 180.0  # longest a backend call may take before it counts as failed
# What a start, stop or store write may raise that the manager answers instead of crashing on.
EXPECTED = (BackendError, OSError, asyncio.TimeoutError, sqlite3.Error, StoreError)
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_FULL_TEXT = ("no space left on device", "database or disk is full", "disk quota exceeded")


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) says the disk or a quota is full."""
    seen: BaseException | None = exc
    for _ in range(5):  # follow __cause__/__context__ a few links, never a cycle
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno in _FULL_ERRNOS:
            return True
        if isinstance(seen, sqlite3.Error) and getattr(seen, "sqlite_errorcode", None) == 13:
            return True  # SQLITE_FULL
        if any(text in str(seen).lower() for text in _FULL_TEXT):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def failure(what: str, exc: BaseException) -> RequestFailed:
    """The refusal for ``exc`` raised while doing ``what``: 507 for a full disk, else 503."""
    if is_disk_full(exc):
        return RequestFailed(
            ErrorCode.INSUFFICIENT_STORAGE,
            f"{what}: the miner's disk is full; nothing was kept, try another miner or later",
            status=507,
        )
    return RequestFailed(ErrorCode.BACKEND_ERROR, f"{what}: {exc}", status=503)


__all__ = ["BACKEND_TIMEOUT_S", "EXPECTED", "failure", "is_disk_full"]
