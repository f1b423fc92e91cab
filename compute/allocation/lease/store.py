"""Durable lease table of a miner (SQLite, WAL, ``synchronous=FULL``).

Leases survive miner restarts: the store is the source of truth the manager reconciles the
backend against. Reserving GPUs is one ``BEGIN IMMEDIATE`` transaction that refuses a lease
whose GPUs a live (pending or active) lease already holds, so two concurrent reservations can
never both win.

States: ``pending`` (reserved, the backend is starting it; never shown to a caller) ->
``active`` (set in one transaction with its endpoint, only after the backend started it) ->
``expired`` / ``released``. A ``pending`` row found at start-up is a crash mid-allocation: the
manager's reconcile rolls it back. An optional per-owner idempotency key makes a retried
allocate find the lease its first attempt made instead of making a second.

Only public material is stored: the renter's SSH *public* key and the lease's public host key.
What it deliberately does not do: talk to a backend, check ownership, or know the clock.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from compute.allocation.lease.records import Endpoint, LeaseRecord, Receipt
from compute.sqlitedb import LockedDb

LeaseState = Literal["pending", "active", "expired", "released"]
SCHEMA_VERSION = 3
_LIVE = "state IN ('pending','active')"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    lease_id TEXT PRIMARY KEY,
    owner_hotkey TEXT NOT NULL,
    purpose TEXT NOT NULL,
    gpus TEXT NOT NULL,
    cpu_count INTEGER NOT NULL,
    memory_mb INTEGER NOT NULL,
    disk_gb INTEGER NOT NULL,
    shm_mb INTEGER NOT NULL,
    extra_ports INTEGER NOT NULL,
    ssh_public_key TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    state TEXT NOT NULL,
    requirements TEXT NOT NULL,
    endpoint TEXT,
    ended_at REAL,
    idempotency_key TEXT,
    host TEXT
);
CREATE INDEX IF NOT EXISTS leases_owner ON leases(owner_hotkey, state);
CREATE INDEX IF NOT EXISTS leases_state ON leases(state, expires_at);
CREATE TABLE IF NOT EXISTS lease_receipts (
    lease_id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    body TEXT NOT NULL,
    headers TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS lease_releases (
    lease_id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    body TEXT NOT NULL,
    headers TEXT NOT NULL
);
"""
_INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS leases_idem ON leases(owner_hotkey, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
"""


class StoreError(Exception):
    """Root of lease-store errors."""


class GpuConflict(StoreError):
    """A reservation asked for GPUs that a live lease already holds."""


class DuplicateKey(StoreError):
    """A reservation reused an idempotency key its owner already used."""


@dataclass(frozen=True)
class StoredLease:
    """A lease row: the record, its state, the original requirements (JSON) and its endpoint."""

    record: LeaseRecord
    state: LeaseState
    requirements_json: str
    endpoint: Endpoint | None = None
    ended_at: float | None = None
    idempotency_key: str | None = None

    @property
    def lease_id(self) -> str:
        return self.record.lease_id


class LeaseStore(LockedDb):
    """Thread-safe: writes on one connection under a lock (single-row and short), reads on each
    thread's own read connection (never behind a writer)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._conn.executescript(_SCHEMA)
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(leases)")}
        if "idempotency_key" not in columns:  # a version-1 table: add the column, keep the rows
            self._conn.execute("ALTER TABLE leases ADD COLUMN idempotency_key TEXT")
        if "host" not in columns:  # before version 3: every lease ran on the miner's own engine
            self._conn.execute("ALTER TABLE leases ADD COLUMN host TEXT")
        self._conn.executescript(_INDEXES)
        self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # ---------------------------------------------------------------- writes

    def reserve(self, lease: StoredLease) -> None:
        """Insert ``lease`` (usually ``pending``) unless one of its GPUs is held.

        Raises :class:`GpuConflict`, or :class:`DuplicateKey` when its idempotency key was used.
        """
        record = lease.record
        with self._tx() as conn:
            # a rental clashes with every live lease, a validation lease with rentals, a lease
            # beside the tenants (a validator's presence proof) with none
            held = set() if record.purpose == "beside" else _held_gpus(conn, record.purpose == "validation")
            clash = sorted(held.intersection(record.gpus))
            if clash:
                raise GpuConflict(f"GPUs {clash} are held by another active lease")
            try:
                _insert(conn, lease)
            except sqlite3.IntegrityError as exc:
                raise DuplicateKey(f"idempotency key already used: {exc}") from None

    def activate(self, lease_id: str, endpoint: Endpoint) -> None:
        """``pending`` -> ``active`` with its endpoint, in one transaction (the backend started it)."""
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE leases SET state='active', endpoint=? WHERE lease_id=? AND state='pending'",
                (_endpoint_json(endpoint), lease_id),
            )
            if cursor.rowcount != 1:
                raise StoreError(f"lease {lease_id} is not pending")

    def delete(self, lease_id: str) -> None:
        """Remove a reservation whose start failed (rollback); leases that ran are never deleted."""
        with self._tx() as conn:
            conn.execute("DELETE FROM leases WHERE lease_id=? AND state='pending'", (lease_id,))

    def set_endpoint(self, lease_id: str, endpoint: Endpoint | None) -> None:
        self._update(lease_id, "endpoint=?", _endpoint_json(endpoint))

    def set_expiry(self, lease_id: str, expires_at: float) -> None:
        self._update(lease_id, "expires_at=?", expires_at)

    def set_key(self, lease_id: str, public_key: str) -> None:
        self._update(lease_id, "ssh_public_key=?", public_key)

    def end(self, lease_id: str, state: Literal["expired", "released"], when: float) -> None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE leases SET state=?, ended_at=? WHERE lease_id=? AND state='active'",
                (state, when, lease_id),
            )

    def set_receipt(self, lease_id: str, receipt: Receipt) -> None:
        """Keep the renter's signed allocate request (the lease's proof for validators)."""
        with self._tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO lease_receipts VALUES (?,?,?,?)",
                (lease_id, receipt.path, receipt.body, json.dumps(dict(receipt.headers))),
            )

    def receipt(self, lease_id: str) -> Receipt | None:
        row = (
            self._read()
            .execute("SELECT path, body, headers FROM lease_receipts WHERE lease_id=?", (lease_id,))
            .fetchone()
        )
        return None if row is None else Receipt(row[0], row[1], json.loads(row[2]))

    def set_release(self, lease_id: str, receipt: Receipt) -> None:
        """Keep the owner's signed deallocate request, the first one only (the miner's proof that
        the renter ended the lease itself: docs/collateral.md)."""
        with self._tx() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO lease_releases VALUES (?,?,?,?)",
                (lease_id, receipt.path, receipt.body, json.dumps(dict(receipt.headers))),
            )

    def release(self, lease_id: str) -> Receipt | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT path, body, headers FROM lease_releases WHERE lease_id=?", (lease_id,)
            ).fetchone()
        return None if row is None else Receipt(row[0], row[1], json.loads(row[2]))

    def _update(self, lease_id: str, assignment: str, value: object) -> None:
        with self._tx() as conn:
            cursor = conn.execute(f"UPDATE leases SET {assignment} WHERE lease_id=?", (value, lease_id))
            if cursor.rowcount != 1:
                raise StoreError(f"lease {lease_id} is not in the store")

    # ---------------------------------------------------------------- reads

    def get(self, lease_id: str) -> StoredLease | None:
        row = self._read().execute("SELECT * FROM leases WHERE lease_id=?", (lease_id,)).fetchone()
        return None if row is None else _from_row(row)

    def active(self) -> list[StoredLease]:
        return self._select("WHERE state='active' ORDER BY created_at", ())

    def pending(self) -> list[StoredLease]:
        return self._select("WHERE state='pending' ORDER BY created_at", ())

    def live(self) -> list[StoredLease]:
        """Pending and active leases: what counts against capacity."""
        return self._select(f"WHERE {_LIVE} ORDER BY created_at", ())

    def by_key(self, owner_hotkey: str, key: str) -> StoredLease | None:
        found = self._select("WHERE owner_hotkey=? AND idempotency_key=?", (owner_hotkey, key))
        return found[0] if found else None

    def by_owner(self, owner_hotkey: str, limit: int = 1024) -> list[StoredLease]:
        """Active leases first, then the most recently ended ones (pending ones are not shown)."""
        return self._select(
            "WHERE owner_hotkey=? AND state!='pending' ORDER BY state='active' DESC, created_at DESC LIMIT ?",
            (owner_hotkey, limit),
        )

    def due(self, now: float) -> list[StoredLease]:
        return self._select("WHERE state='active' AND expires_at<=? ORDER BY expires_at", (now,))

    def held_gpus(self, only_rentals: bool = False) -> set[int]:
        """GPUs live leases hold (``only_rentals``: those rentals hold; validation leases share GPUs)."""
        return _held_gpus(self._read(), only_rentals)

    def _select(self, where: str, params: tuple) -> list[StoredLease]:
        rows = self._read().execute(f"SELECT * FROM leases {where}", params).fetchall()
        return [_from_row(row) for row in rows]


def _insert(conn: sqlite3.Connection, lease: StoredLease) -> None:
    record = lease.record
    conn.execute(
        "INSERT INTO leases VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            record.lease_id,
            record.owner_hotkey,
            record.purpose,
            json.dumps(list(record.gpus)),
            record.cpu_count,
            record.memory_mb,
            record.disk_gb,
            record.shm_mb,
            record.extra_ports,
            record.ssh_public_key,
            record.created_at,
            record.expires_at,
            lease.state,
            lease.requirements_json,
            _endpoint_json(lease.endpoint),
            None,
            lease.idempotency_key,
            record.host,
        ),
    )


def _held_gpus(conn: sqlite3.Connection, only_rentals: bool = False) -> set[int]:
    held: set[int] = set()
    where = f"{_LIVE} AND purpose='rental'" if only_rentals else _LIVE
    for (gpus,) in conn.execute(f"SELECT gpus FROM leases WHERE {where}"):
        held.update(json.loads(gpus))
    return held


def _endpoint_json(endpoint: Endpoint | None) -> str | None:
    if endpoint is None:
        return None
    return json.dumps(
        {
            "host": endpoint.host,
            "ssh_port": endpoint.ssh_port,
            "username": endpoint.username,
            "host_key": endpoint.host_key,
            "ports": {str(k): v for k, v in endpoint.ports.items()},
            "udp_ports": {str(k): v for k, v in endpoint.udp_ports.items()},
        }
    )


def _from_row(row: tuple) -> StoredLease:
    (
        lease_id,
        owner,
        purpose,
        gpus,
        cpu,
        mem,
        disk,
        shm,
        ports,
        key,
        created,
        expires,
        state,
        req,
        ep,
        ended,
        idem,
        host,
    ) = row
    record = LeaseRecord(
        lease_id=lease_id,
        owner_hotkey=owner,
        purpose=purpose,
        gpus=tuple(json.loads(gpus)),
        cpu_count=cpu,
        memory_mb=mem,
        disk_gb=disk,
        shm_mb=shm,
        extra_ports=ports,
        ssh_public_key=key,
        created_at=created,
        expires_at=expires,
        template=_template(req),
        volume=_volume(req),
        host=host,
        overlay=_overlay(req),
    )
    endpoint = None
    if ep is not None:
        data = json.loads(ep)
        endpoint = Endpoint(
            host=data["host"],
            ssh_port=data["ssh_port"],
            username=data["username"],
            host_key=data["host_key"],
            ports={int(k): int(v) for k, v in data["ports"].items()},
            udp_ports={int(k): int(v) for k, v in (data.get("udp_ports") or {}).items()},
        )
    return StoredLease(
        record=record,
        state=state,
        requirements_json=req,
        endpoint=endpoint,
        ended_at=ended,
        idempotency_key=idem,
    )


def _template(requirements_json: str) -> str | None:
    """The template a stored lease asked for (kept in its requirements JSON, no extra column)."""
    try:
        value = json.loads(requirements_json).get("template")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _overlay(requirements_json: str) -> bool:
    """Whether a stored lease is a cluster member with an overlay (kept in its requirements JSON)."""
    try:
        return json.loads(requirements_json).get("overlay") is True
    except (ValueError, AttributeError):
        return False


def _volume(requirements_json: str) -> str | None:
    """The persistent volume a stored lease mounts (kept in its requirements JSON)."""
    try:
        value = (json.loads(requirements_json).get("volume") or {}).get("name")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def with_record(lease: StoredLease, **changes: Any) -> StoredLease:
    """A copy of ``lease`` with fields of its record replaced."""
    return replace(lease, record=replace(lease.record, **changes))


__all__ = [
    "DuplicateKey",
    "GpuConflict",
    "LeaseState",
    "LeaseStore",
    "StoreError",
    "StoredLease",
    "with_record",
]
