"""The validator's lease journal: every lease it asked a miner for, until the miner confirms its end.

A validation (or canary) lease holds a miner's GPUs. The validator always releases it when its test
ends, but a release can fail (the miner was killed mid-test, the network dropped) and the validator
itself can be killed while it holds one. So every allocate is written down *before* it is sent
(``asking``), with its lease id once granted (``held``), as ``unsure`` when the answer never came
(the miner may have made the lease), and as ``releasing`` when a release failed. A row goes only
when the miner confirms the lease ended (or denies knowing it), or once its term is over (the
miner's own clock ends it then). ``run`` names the validator process that asked: rows of an
earlier run are all due for release, its leases being in no test any more.

One table in the validator's store file (WAL), its own connection; every write one transaction.
What it deliberately does not do: talk to miners (``compute.validator.journal`` does).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from compute.sqlitedb import LockedDb

JournalState = Literal["asking", "held", "unsure", "releasing"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lease_journal (
    key TEXT PRIMARY KEY,
    hotkey TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    purpose TEXT NOT NULL,
    run TEXT NOT NULL,
    state TEXT NOT NULL,
    lease_id TEXT,
    asked_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS lease_journal_lease ON lease_journal(lease_id);
"""


@dataclass(frozen=True)
class JournalEntry:
    key: str  # the allocate's idempotency key (one per test)
    hotkey: str  # the miner's
    endpoint: str
    purpose: str
    run: str
    state: JournalState
    lease_id: str | None
    asked_at: float
    expires_at: float
    tries: int = 0


class LeaseJournal(LockedDb):
    """The ``lease_journal`` table of the validator store at ``path``."""

    def __init__(self, path: str | Path, clock: Callable[[], float] = time.time) -> None:
        super().__init__(path)
        self._clock = clock
        with self._lock:
            self._conn.executescript(_SCHEMA)

    def asking(self, key: str, hotkey: str, endpoint: str, purpose: str, run: str, term_s: float) -> None:
        """An allocate is about to be sent (again, for a retry with the same key)."""
        now = self._clock()
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO lease_journal VALUES (?,?,?,?,?,'asking',NULL,?,?,0) ON CONFLICT(key) DO "
                "UPDATE SET state=CASE WHEN state='held' THEN 'held' ELSE 'asking' END, run=excluded.run, "
                "expires_at=MAX(expires_at, excluded.expires_at)",
                (key, hotkey, endpoint, purpose, run, now, now + term_s),
            )

    def held(self, key: str, lease_id: str) -> None:
        """The miner granted the lease (its term stays the one asked for, on our clock)."""
        with self._tx() as conn:
            conn.execute("UPDATE lease_journal SET state='held', lease_id=? WHERE key=?", (lease_id, key))

    def unsure(self, key: str) -> None:
        """No answer to the allocate: the miner may hold a lease for it."""
        self._set_state("key", key, "unsure")

    def releasing(self, lease_id: str) -> None:
        """A release failed: the lease stays due until the miner confirms it ended."""
        self._set_state("lease_id", lease_id, "releasing")

    def forget(self, key: str) -> None:
        """No lease exists for this row (refused, released, or unknown to the miner)."""
        with self._tx() as conn:
            conn.execute("DELETE FROM lease_journal WHERE key=?", (key,))

    def released(self, lease_id: str) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM lease_journal WHERE lease_id=?", (lease_id,))

    def tried(self, key: str) -> None:
        with self._tx() as conn:
            conn.execute("UPDATE lease_journal SET tries=tries+1 WHERE key=?", (key,))

    def drop_ended(self) -> int:
        """Forget rows whose term is over (the miner ended those leases itself); how many."""
        with self._tx() as conn:
            return conn.execute("DELETE FROM lease_journal WHERE expires_at<?", (self._clock(),)).rowcount

    def entries(self) -> list[JournalEntry]:
        rows = self._read().execute("SELECT * FROM lease_journal ORDER BY asked_at").fetchall()
        return [JournalEntry(*row) for row in rows]

    def due(self, run: str) -> list[JournalEntry]:
        """Rows to release now: failed releases and unanswered allocates of this run, every row
        of an earlier run. A ``held`` or ``asking`` row of this run belongs to a running test."""
        return [e for e in self.entries() if e.run != run or e.state in ("releasing", "unsure")]

    def _set_state(self, column: str, value: str, state: JournalState) -> None:
        with self._tx() as conn:
            conn.execute(f"UPDATE lease_journal SET state=? WHERE {column}=?", (state, value))


__all__ = ["JournalEntry", "JournalState", "LeaseJournal"]
