"""SQLite the way every store of this project uses it.

One place for the connection settings (WAL journal, busy timeout, autocommit mode so transactions
are explicit, the durability level each store chooses) and for the write transaction: ``BEGIN
IMMEDIATE`` takes the write lock up front, so concurrent writers (threads or other processes)
queue on the busy timeout instead of failing halfway through. Schemas and queries stay with
their stores.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal


def open_db(
    path: str | Path,
    *,
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    timeout: float = 10.0,
    threads: bool = False,
) -> sqlite3.Connection:
    """An autocommit connection in WAL mode; ``threads`` allows use from several threads (lock it)."""
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=not threads)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    return conn


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: committed when the block ends, rolled back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class LockedDb:
    """Base of a store one process uses from several threads: one durable connection, a lock
    around every use of it, and ``_tx`` for a write transaction under that lock."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = open_db(self.path, synchronous="FULL", threads=True)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, immediate(self._conn) as conn:
            yield conn
