"""The operator's lease book: one SQLite file listing the leases this operator opened.

Each row says which miner holds the lease (uid, hotkey, endpoint), how to reach it (SSH host,
port, user, the pinned host key and the known_hosts file written from it), which key opens it
(the *path* of the private key file, never its contents), and until when it runs.

Before an allocate request leaves, its *intent* is written here (the request as it will be
signed, its idempotency key, the miner asked and the key file): a process interrupted or killed
at any moment after that leaves the intent behind, and the operator settles it (the same request
again gets the lease the first one made, which is then released), so no lease runs that the book
does not know. Leases rented together as a cluster are listed under a cluster id (a table of its
own, added to older books when opened), with every link proof the renter ran across them (its own
figure, on its own clock: ``cluster check``, ``allocate --min-link-gbps``). Each lease also keeps
the price per hour the miner signed when it rented it.

Deliberately not stored: secrets of any kind. Private keys live as 0600 files in the data
directory; the database only points at them. The miner stays the authority on a lease's state;
the book caches what the miner last said.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from compute.sqlitedb import LockedDb

SCHEMA_VERSION = 3  # 2: intents (allocations not yet settled) and each lease's price per hour;
# 3: whether a cluster's members are joined by the renter's overlay

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    lease_id TEXT PRIMARY KEY,
    owner_hotkey TEXT NOT NULL,
    network TEXT NOT NULL,
    netuid INTEGER NOT NULL,
    miner_uid INTEGER,
    miner_hotkey TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    state TEXT NOT NULL,
    verified INTEGER NOT NULL,
    gpu_summary TEXT NOT NULL,
    requirements TEXT NOT NULL,
    ssh_host TEXT,
    ssh_port INTEGER,
    ssh_username TEXT,
    host_key TEXT,
    ports TEXT NOT NULL,
    known_hosts_path TEXT,
    private_key_path TEXT,
    public_key TEXT NOT NULL,
    key_generated INTEGER NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    price_per_hour REAL,
    udp_ports TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS leases_owner ON leases (owner_hotkey, state);
CREATE TABLE IF NOT EXISTS intents (
    idempotency_key TEXT PRIMARY KEY,
    owner_hotkey TEXT NOT NULL,
    miner_uid INTEGER,
    miner_hotkey TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    request TEXT NOT NULL,
    private_key_path TEXT,
    key_generated INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS clusters (
    cluster_id TEXT PRIMARY KEY,
    owner_hotkey TEXT NOT NULL,
    lease_ids TEXT NOT NULL,
    gpus_per_node INTEGER NOT NULL,
    created_at REAL NOT NULL,
    overlay INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS cluster_links (
    cluster_id TEXT NOT NULL,
    checked_at REAL NOT NULL,
    passed INTEGER NOT NULL,
    bandwidth_gbs REAL NOT NULL,
    plain_gbs REAL,
    vector_bytes INTEGER NOT NULL,
    interval_s REAL NOT NULL,
    failures TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cluster_links_by_cluster ON cluster_links (cluster_id, checked_at);
"""


class BookError(Exception):
    """The lease book file cannot be opened or has an unknown schema."""


@dataclass(frozen=True)
class BookEntry:
    lease_id: str
    owner_hotkey: str
    network: str
    netuid: int
    miner_uid: int | None
    miner_hotkey: str
    endpoint: str
    state: str  # active | expired | released
    verified: bool
    gpu_summary: str  # e.g. "2 x NVIDIA H100 80GB HBM3"
    requirements: dict[str, Any]
    ssh_host: str | None
    ssh_port: int | None
    ssh_username: str | None
    host_key: str | None
    ports: dict[int, int]
    known_hosts_path: str | None
    private_key_path: str | None
    public_key: str
    key_generated: bool
    created_at: float
    expires_at: float
    updated_at: float
    price_per_hour: float | None = None  # as the miner signed it at allocate (None: no price given)
    udp_ports: dict[int, int] = field(default_factory=dict)  # lease UDP port -> public (an overlay's)

    def spent(self, now: float) -> float | None:
        """What the lease has cost so far at its price: from its start to now, or to its end."""
        if self.price_per_hour is None:
            return None
        end = min(now, self.expires_at) if self.state == "active" else min(self.updated_at, self.expires_at)
        return round(self.price_per_hour * max(0.0, end - self.created_at) / 3600, 6)

    def time_left(self, now: float) -> float:
        return max(0.0, self.expires_at - now) if self.state == "active" else 0.0

    def with_changes(self, **changes: Any) -> BookEntry:
        return replace(self, **changes)


@dataclass(frozen=True)
class Intent:
    """An allocate request about to be sent (or sent, its answer not yet recorded).

    ``request`` is the ``AllocateRequest`` as JSON; sent again, it carries the same idempotency
    key, so the miner answers with the lease the first one made instead of making another."""

    idempotency_key: str
    owner_hotkey: str
    miner_uid: int | None
    miner_hotkey: str
    endpoint: str
    request: str
    private_key_path: str | None
    key_generated: bool
    created_at: float


@dataclass(frozen=True)
class ClusterRecord:
    """Leases rented together (``register.py allocate --nodes``), in rank order."""

    cluster_id: str
    owner_hotkey: str
    lease_ids: tuple[str, ...]
    gpus_per_node: int
    created_at: float
    overlay: bool = False  # joined by the renter's WireGuard overlay (``allocate --nodes N --overlay``)


@dataclass(frozen=True)
class LinkRecord:
    """One link proof the renter ran across a cluster's nodes (``cluster check``): the renter drew
    the key, held the clock and verified the openings, so the figure is the renter's own."""

    cluster_id: str
    checked_at: float
    passed: bool
    bandwidth_gbs: float  # per link; 0 when the proof failed
    plain_gbs: float | None  # a plain all-reduce of the same size, the same clock
    vector_bytes: int
    interval_s: float
    failures: tuple[str, ...] = ()


_COLUMNS = [f.name for f in fields(BookEntry)]
_INTENT_COLUMNS = [f.name for f in fields(Intent)]


def _to_row(entry: BookEntry) -> dict[str, Any]:
    row = asdict(entry)
    row["requirements"] = json.dumps(entry.requirements, sort_keys=True)
    row["ports"] = json.dumps({str(k): v for k, v in entry.ports.items()})
    row["udp_ports"] = json.dumps({str(k): v for k, v in entry.udp_ports.items()})
    row["verified"] = int(entry.verified)
    row["key_generated"] = int(entry.key_generated)
    return row


def _from_row(row: sqlite3.Row) -> BookEntry:
    data = dict(row)
    data["requirements"] = json.loads(data["requirements"])
    data["ports"] = {int(k): int(v) for k, v in json.loads(data["ports"]).items()}
    data["udp_ports"] = {int(k): int(v) for k, v in json.loads(data["udp_ports"] or "{}").items()}
    data["verified"] = bool(data["verified"])
    data["key_generated"] = bool(data["key_generated"])
    return BookEntry(**data)


class LeaseBook(LockedDb):
    """SQLite-backed list of this operator's leases (safe to open from several processes).

    One connection for writes (under a lock, every commit synced to disk: ``FULL``) and one per
    thread for reads, kept open: a connection opened and closed per call cost ~2.5 ms here (the
    close checkpoints the WAL), which a cluster's N intents and N settlements paid one after another
    on the event loop."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # its WAL files take its mode
            path.chmod(0o600)
            super().__init__(path)
            self._conn.row_factory = sqlite3.Row
            with self._tx() as conn:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
                (version,) = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if version == "1":  # a book of an earlier register.py: add the new column, keep every row
                    conn.execute("ALTER TABLE leases ADD COLUMN price_per_hour REAL")
                    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
                    version = "2"
                if version == "2":  # clusters gain ``overlay``, leases their UDP ports (v1's clusters
                    # table was just made with its column)
                    columns = {row[1] for row in conn.execute("PRAGMA table_info(clusters)")}
                    if "overlay" not in columns:
                        conn.execute("ALTER TABLE clusters ADD COLUMN overlay INTEGER NOT NULL DEFAULT 0")
                    conn.execute("ALTER TABLE leases ADD COLUMN udp_ports TEXT NOT NULL DEFAULT '{}'")
                    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
                    version = "3"
        except sqlite3.DatabaseError as exc:
            if hasattr(self, "_conn"):
                self.close()
            raise BookError(f"cannot open lease book {path}: {exc}") from exc
        if int(version) != SCHEMA_VERSION:
            self.close()
            raise BookError(f"lease book {self.path} has schema {version}, expected {SCHEMA_VERSION}")

    def _read(self) -> sqlite3.Connection:
        conn = super()._read()
        conn.row_factory = sqlite3.Row
        return conn

    def save(self, entry: BookEntry) -> None:
        """Insert or replace the row for ``entry.lease_id``."""
        row = _to_row(entry)
        names = ", ".join(_COLUMNS)
        marks = ", ".join(f":{name}" for name in _COLUMNS)
        with self._tx() as conn:
            conn.execute(f"INSERT OR REPLACE INTO leases ({names}) VALUES ({marks})", row)

    def get(self, lease_id: str) -> BookEntry | None:
        conn = self._read()
        row = conn.execute("SELECT * FROM leases WHERE lease_id = ?", (lease_id,)).fetchone()
        return _from_row(row) if row is not None else None

    def entries(self, owner_hotkey: str, include_ended: bool = False) -> list[BookEntry]:
        """The owner's leases, newest first; only active ones unless ``include_ended``."""
        query = "SELECT * FROM leases WHERE owner_hotkey = ?"
        if not include_ended:
            query += " AND state = 'active'"
        conn = self._read()
        rows = conn.execute(query + " ORDER BY created_at DESC", (owner_hotkey,)).fetchall()
        return [_from_row(row) for row in rows]

    def miners(self, owner_hotkey: str) -> list[tuple[str, str, int | None]]:
        """(hotkey, endpoint, uid) of every miner this owner rented from or asked to, its latest
        endpoint first seen: where leases of this owner may run."""
        query = (
            "SELECT miner_hotkey, endpoint, miner_uid, created_at FROM leases WHERE owner_hotkey = ? "
            "UNION ALL SELECT miner_hotkey, endpoint, miner_uid, created_at FROM intents WHERE owner_hotkey = ? "
            "ORDER BY created_at DESC"
        )
        conn = self._read()
        rows = conn.execute(query, (owner_hotkey, owner_hotkey)).fetchall()
        found: dict[str, tuple[str, str, int | None]] = {}
        for row in rows:
            found.setdefault(row["miner_hotkey"], (row["miner_hotkey"], row["endpoint"], row["miner_uid"]))
        return list(found.values())

    # ------------------------------------------------------------ intents

    def add_intent(self, intent: Intent) -> None:
        """Written before the request leaves (synchronously: on disk when this returns)."""
        row = asdict(intent)
        row["key_generated"] = int(intent.key_generated)
        names = ", ".join(_INTENT_COLUMNS)
        marks = ", ".join(f":{name}" for name in _INTENT_COLUMNS)
        with self._tx() as conn:
            conn.execute(f"INSERT OR REPLACE INTO intents ({names}) VALUES ({marks})", row)

    def drop_intent(self, idempotency_key: str) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM intents WHERE idempotency_key = ?", (idempotency_key,))

    def record_settled(self, entry: BookEntry, idempotency_key: str) -> None:
        """The lease an intent made, saved and the intent dropped in one transaction."""
        row = _to_row(entry)
        names = ", ".join(_COLUMNS)
        marks = ", ".join(f":{name}" for name in _COLUMNS)
        with self._tx() as conn:
            conn.execute(f"INSERT OR REPLACE INTO leases ({names}) VALUES ({marks})", row)
            conn.execute("DELETE FROM intents WHERE idempotency_key = ?", (idempotency_key,))

    def intents(self, owner_hotkey: str) -> list[Intent]:
        """The owner's allocations not yet settled, the oldest first."""
        conn = self._read()
        rows = conn.execute(
            "SELECT * FROM intents WHERE owner_hotkey = ? ORDER BY created_at", (owner_hotkey,)
        ).fetchall()
        return [Intent(**{**dict(row), "key_generated": bool(row["key_generated"])}) for row in rows]

    # ------------------------------------------------------------ clusters

    def add_cluster(self, record: ClusterRecord) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO clusters (cluster_id, owner_hotkey, lease_ids, gpus_per_node, "
                "created_at, overlay) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    record.cluster_id,
                    record.owner_hotkey,
                    json.dumps(list(record.lease_ids)),
                    record.gpus_per_node,
                    record.created_at,
                    int(record.overlay),
                ),
            )

    def add_link(self, record: LinkRecord) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO cluster_links (cluster_id, checked_at, passed, bandwidth_gbs, plain_gbs, "
                "vector_bytes, interval_s, failures) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.cluster_id,
                    record.checked_at,
                    int(record.passed),
                    record.bandwidth_gbs,
                    record.plain_gbs,
                    record.vector_bytes,
                    record.interval_s,
                    json.dumps(list(record.failures)),
                ),
            )

    def last_link(self, cluster_id: str) -> LinkRecord | None:
        """The cluster's latest link proof, passed or not; None when it was never proven."""
        conn = self._read()
        row = conn.execute(
            "SELECT * FROM cluster_links WHERE cluster_id = ? ORDER BY checked_at DESC LIMIT 1",
            (cluster_id,),
        ).fetchone()
        if row is None:
            return None
        return LinkRecord(
            row["cluster_id"],
            float(row["checked_at"]),
            bool(row["passed"]),
            float(row["bandwidth_gbs"]),
            None if row["plain_gbs"] is None else float(row["plain_gbs"]),
            int(row["vector_bytes"]),
            float(row["interval_s"]),
            tuple(json.loads(row["failures"])),
        )

    def clusters(self, owner_hotkey: str) -> list[ClusterRecord]:
        """The owner's clusters, newest first (ended ones too: their members' states say)."""
        conn = self._read()
        rows = conn.execute(
            "SELECT * FROM clusters WHERE owner_hotkey = ? ORDER BY created_at DESC", (owner_hotkey,)
        ).fetchall()
        return [
            ClusterRecord(
                row["cluster_id"],
                row["owner_hotkey"],
                tuple(json.loads(row["lease_ids"])),
                int(row["gpus_per_node"]),
                float(row["created_at"]),
                bool(row["overlay"]),
            )
            for row in rows
        ]
