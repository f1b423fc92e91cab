"""The presence log: every presence check a validator ran, and each miner's verdict in it.

A presence check proves, at one moment, which miners hold their proven GPUs exclusively
(docs/presence.md); a round whose one lockstep window covered every miner counts as one too
(``kind="round"``). The log is what the credit's presence share is computed from
(``compute.scoring.presence``). Two additive tables in the validator's store file (created on open;
older files gain them, older code ignores them). Writes are one transaction per check.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

PRESENCE_SCHEMA = """
CREATE TABLE IF NOT EXISTS presence_checks (
    check_id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    miners INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS presence_verdicts (
    check_id INTEGER NOT NULL REFERENCES presence_checks(check_id),
    uid INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    fraction REAL NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (check_id, uid)
);
CREATE INDEX IF NOT EXISTS presence_verdicts_hotkey ON presence_verdicts (hotkey, check_id);
"""


@dataclass(frozen=True)
class PresenceEntry:
    """One miner in one check: the share of its proven GPUs found present (0: absent), and why."""

    uid: int
    hotkey: str
    fraction: float
    reason: str = ""


@dataclass(frozen=True)
class PresenceRecord:
    check_id: int
    at: float  # wall clock, when the check ran
    kind: str  # "presence" (a presence check) or "round" (a round that was one window over everyone)
    entries: tuple[PresenceEntry, ...]

    def fractions(self) -> dict[str, float]:
        return {e.hotkey: e.fraction for e in self.entries}


class PresenceTables:
    """Mixed into ``ValidatorStore`` (which provides the connection, its lock and transactions)."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _clock: Callable[[], float]
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def record_presence(self, kind: str, entries: Iterable[PresenceEntry], at: float | None = None) -> int:
        """Store one check and its verdicts in one transaction; returns its id."""
        rows = [(e.uid, e.hotkey, min(1.0, max(0.0, float(e.fraction))), e.reason[:500]) for e in entries]
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO presence_checks (at, kind, miners) VALUES (?, ?, ?)",
                (self._clock() if at is None else at, kind, len(rows)),
            )
            check_id = cur.lastrowid
            assert check_id is not None  # an INSERT into a rowid table always sets it
            db.executemany(
                "INSERT INTO presence_verdicts VALUES (?, ?, ?, ?, ?)", [(check_id, *row) for row in rows]
            )
        return check_id

    def presence_checks(self, limit: int) -> list[PresenceRecord]:
        """The latest ``limit`` checks, oldest first."""
        with self._lock:
            checks = self._db.execute(
                "SELECT check_id, at, kind FROM presence_checks ORDER BY check_id DESC LIMIT ?", (limit,)
            ).fetchall()
            if not checks:
                return []
            rows = self._db.execute(
                "SELECT check_id, uid, hotkey, fraction, reason FROM presence_verdicts WHERE check_id >= ?",
                (checks[-1][0],),
            ).fetchall()
        entries: dict[int, list[PresenceEntry]] = {}
        for check_id, uid, hotkey, fraction, reason in rows:
            entries.setdefault(check_id, []).append(PresenceEntry(uid, hotkey, fraction, reason))
        return [
            PresenceRecord(cid, at, kind, tuple(sorted(entries.get(cid, []), key=lambda e: e.uid)))
            for cid, at, kind in reversed(checks)
        ]

    def presence_count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM presence_checks").fetchone()[0]


__all__ = ["PRESENCE_SCHEMA", "PresenceEntry", "PresenceRecord", "PresenceTables"]
