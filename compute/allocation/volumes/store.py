"""Durable table of a miner's persistent volumes (SQLite, next to the lease table).

One row per (owner hotkey, name): its size, how its size is held (``hard``/``watch``), when it was
made, when a lease last stopped using it, the retention that applies from then, and its ``state``:
``creating`` (written *before* the driver makes it: a journal of the intent, so a crash in the
middle is finished or undone at the next start), ``ready``, or ``removing`` (written before the
driver removes it, so a crash in the middle finishes the removal). Which lease
uses a volume is not stored here: it is read from the live leases (their requirements name the
volume), so a crash can never leave a volume marked attached to a lease that is gone.

What it deliberately does not do: check caps or ownership, or touch Docker.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from compute.sqlitedb import LockedDb

_SCHEMA = """
CREATE TABLE IF NOT EXISTS volumes (
    owner_hotkey TEXT NOT NULL,
    name TEXT NOT NULL,
    size_gb REAL NOT NULL,
    quota TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_used_at REAL NOT NULL,
    retention_s REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'ready',
    PRIMARY KEY (owner_hotkey, name)
);
"""
VolumeState = Literal["creating", "ready", "removing"]


@dataclass(frozen=True)
class VolumeRow:
    owner: str
    name: str
    size_gb: float
    quota: str
    created_at: float
    last_used_at: float
    retention_s: float
    state: str = "ready"  # VolumeState

    @property
    def expires_at(self) -> float:
        """When the volume goes if no lease uses it again."""
        return self.last_used_at + self.retention_s


class VolumeStore(LockedDb):
    """Thread-safe: one connection guarded by a lock."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        with self._lock:
            self._conn.executescript(_SCHEMA)
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(volumes)")}
            if "state" not in columns:  # a table from before the journal: its volumes were made
                self._conn.execute("ALTER TABLE volumes ADD COLUMN state TEXT NOT NULL DEFAULT 'ready'")

    def insert(self, row: VolumeRow) -> bool:
        """Add ``row``; False when the owner already has a volume of that name."""
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO volumes VALUES (?,?,?,?,?,?,?,?)",
                (
                    row.owner,
                    row.name,
                    row.size_gb,
                    row.quota,
                    row.created_at,
                    row.last_used_at,
                    row.retention_s,
                    row.state,
                ),
            )
            return cursor.rowcount == 1

    def set_state(self, owner: str, name: str, state: VolumeState) -> None:
        with self._tx() as conn:
            conn.execute("UPDATE volumes SET state=? WHERE owner_hotkey=? AND name=?", (state, owner, name))

    def used(self, owner: str, name: str, when: float, retention_s: float) -> None:
        """A lease stopped using the volume at ``when``: its retention starts again."""
        with self._tx() as conn:
            conn.execute(
                "UPDATE volumes SET last_used_at=MAX(last_used_at, ?), retention_s=? "
                "WHERE owner_hotkey=? AND name=?",
                (when, retention_s, owner, name),
            )

    def delete(self, owner: str, name: str) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM volumes WHERE owner_hotkey=? AND name=?", (owner, name))

    def get(self, owner: str, name: str) -> VolumeRow | None:
        found = self._select("WHERE owner_hotkey=? AND name=?", (owner, name))
        return found[0] if found else None

    def by_owner(self, owner: str) -> list[VolumeRow]:
        return self._select("WHERE owner_hotkey=? ORDER BY created_at", (owner,))

    def all(self) -> list[VolumeRow]:
        return self._select("ORDER BY created_at", ())

    def _select(self, where: str, params: tuple) -> list[VolumeRow]:
        rows = self._read().execute(f"SELECT * FROM volumes {where}", params).fetchall()
        return [VolumeRow(*row) for row in rows]


__all__ = ["VolumeRow", "VolumeState", "VolumeStore"]
