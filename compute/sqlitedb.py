"""SQLite the way every store of this project uses it.

One place for the connection settings (WAL journal, busy timeout, autocommit mode so transactions
are explicit, the durability level each store chooses) and for the write transaction: ``BEGIN
IMMEDIATE`` takes the write lock up front, so concurrent writers (threads or other processes)
queue on the busy timeout instead of failing halfway through) and for reads that never wait for a
writer (a read connection per thread, WAL). Schemas and queries stay with their stores.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

READ_TIMEOUT_S = 2.0  # a WAL reader waits only for a checkpoint or recovery, never for a writer


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


class DbBusy(sqlite3.OperationalError):
    """Another connection (often another process) held the write lock past the busy timeout."""


class LockedDb:
    """Base of a store one process uses from several threads.

    Writes: one durable connection, a lock around it, ``_tx`` for a write transaction under that
    lock (a write lock not granted within the busy timeout raises :class:`DbBusy`). Reads:
    ``_read()``, a read-only connection per thread that takes no Python lock, so in WAL mode a read
    never queues behind a writer, ours or another process's, that waits on or holds the lock."""

    def __init__(self, path: str | Path, *, write_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = open_db(self.path, synchronous="FULL", timeout=write_timeout, threads=True)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        with self._readers_lock:
            self._closed = True
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()  # sqlite3 allows closing from another thread once nothing runs on it
        with self._lock:
            self._conn.close()

    def _read(self) -> sqlite3.Connection:
        """This thread's read-only connection (opened on first use, closed by ``close``)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                str(self.path), timeout=READ_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(READ_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA query_only = 1")
            with self._readers_lock:
                if self._closed:
                    conn.close()
                    raise sqlite3.ProgrammingError("the store is closed")
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                with immediate(self._conn) as conn:
                    yield conn
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    raise DbBusy(f"{self.path.name}: the write lock is held elsewhere ({exc})") from exc
                raise
