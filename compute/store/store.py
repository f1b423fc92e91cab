"""The validator's durable state in one SQLite file (WAL).

Tables: ``miners`` (uid -> hotkey, first seen), ``rounds`` (bookkeeping), ``presence_checks`` and
``presence_verdicts`` (the presence log, ``compute.store.presence``), ``offers`` (each miner's
latest availability answer, informational: ``compute.store.offers``), ``pog_results`` (one row
per (round, uid), with the in-depth figures and the reported GPU UUID set since schema 2, the rental-truth factors
and shared-device uids since schema 3), ``scores`` (moving averages), ``score_updates`` (the log that makes applying a
round idempotent) and ``weights_set`` (every attempt to set weights).

Crash safety: every write is one transaction. A round's results are written as they arrive, so a
restart resumes the open round and re-tests only the miners without a result. Closing a round
applies all of its score updates and marks it finished in ONE transaction; each update is keyed by
(round_id, uid) under a uniqueness constraint, so a round can never be counted twice, whatever
point a ``kill -9`` hits.

This module does no scoring math and no networking; it is used from one event loop (calls are
short; the connection is guarded by a lock so ``asyncio.to_thread`` callers are safe too).
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from compute.sqlitedb import immediate, open_db
from compute.store.offers import OFFERS_SCHEMA, OfferTables
from compute.store.presence import PRESENCE_SCHEMA, PresenceTables
from compute.store.records import PogResult, RoundRecord, ScoreRecord, ScoreUpdate, WeightsRecord

log = logging.getLogger(__name__)

SCHEMA_VERSION = 4

# Columns added by each schema version (``ALTER TABLE ... ADD COLUMN``, so older rows read as NULL).
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: (
        "mem_gbs REAL",
        "mem_proven_gb REAL",
        "sustained_ratio REAL",
        "sustained_factor REAL",
        "scaling_efficiency REAL",
        "credited_gpus INTEGER",
        "host TEXT NOT NULL DEFAULT '{}'",
        "gpu_uuids TEXT NOT NULL DEFAULT '[]'",
        "depth_round INTEGER",
        "history_reset INTEGER NOT NULL DEFAULT 0",
    ),
    3: (  # rental truth and one device, one reward (docs/validator.md)
        "rented_fraction REAL",
        "availability REAL",
        "rental_uptime REAL",
        "shared_with TEXT NOT NULL DEFAULT '[]'",
    ),
    4: ("hosts TEXT NOT NULL DEFAULT '{}'",),  # multi-host miners: host -> credited sample
}
_RESULT_COLUMNS = (
    "round_id",
    "uid",
    "hotkey",
    "ok",
    "sample",
    "rented",
    "reasons",
    "models",
    "tflops_fp16",
    "tflops_fp32",
    "gpu_count",
    "timings",
    "block",
    "created",
    "mem_gbs",
    "mem_proven_gb",
    "sustained_ratio",
    "sustained_factor",
    "scaling_efficiency",
    "credited_gpus",
    "host",
    "gpu_uuids",
    "depth_round",
    "history_reset",
    "rented_fraction",
    "availability",
    "rental_uptime",
    "shared_with",
    "hosts",
)
_SELECT_RESULT = f"SELECT {', '.join(_RESULT_COLUMNS)} FROM pog_results"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS miners (
    uid INTEGER PRIMARY KEY,
    hotkey TEXT NOT NULL,
    first_seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    round_id INTEGER PRIMARY KEY AUTOINCREMENT,
    block INTEGER NOT NULL,
    started REAL NOT NULL,
    finished REAL
);
CREATE TABLE IF NOT EXISTS pog_results (
    round_id INTEGER NOT NULL REFERENCES rounds(round_id),
    uid INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    ok INTEGER NOT NULL,
    sample REAL NOT NULL,
    rented INTEGER NOT NULL DEFAULT 0,
    reasons TEXT NOT NULL,
    models TEXT NOT NULL,
    tflops_fp16 REAL,
    tflops_fp32 REAL,
    gpu_count INTEGER NOT NULL,
    timings TEXT NOT NULL,
    block INTEGER NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (round_id, uid)
);
CREATE INDEX IF NOT EXISTS pog_results_hotkey ON pog_results (hotkey, ok, round_id);
CREATE INDEX IF NOT EXISTS pog_results_uid ON pog_results (uid, round_id);
CREATE INDEX IF NOT EXISTS pog_results_verified ON pog_results (hotkey, round_id) WHERE ok = 1 AND rented = 0;
CREATE TABLE IF NOT EXISTS scores (
    uid INTEGER PRIMARY KEY,
    hotkey TEXT NOT NULL,
    score REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS score_updates (
    round_id INTEGER NOT NULL REFERENCES rounds(round_id),
    uid INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    previous REAL,
    score REAL NOT NULL,
    PRIMARY KEY (round_id, uid)
);
CREATE TABLE IF NOT EXISTS weights_set (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    block INTEGER NOT NULL,
    weights TEXT NOT NULL,
    version_key INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT,
    created REAL NOT NULL
);
"""


class StoreError(Exception):
    """Root of the validator store's errors."""


class SchemaMismatch(StoreError):
    """The database file was written by an incompatible version of this code."""


class RoundAlreadyFinished(StoreError):
    """A round was closed twice; its score updates were applied exactly once."""


class ValidatorStore(PresenceTables, OfferTables):
    """Durable validator state; see the module docstring for the crash-safety contract."""

    def __init__(self, path: str | Path, clock=time.time) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.RLock()
        self._db = open_db(self.path, timeout=30, threads=True)
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)
        self._db.executescript(PRESENCE_SCHEMA)
        self._db.executescript(OFFERS_SCHEMA)
        self._check_schema()

    def _check_schema(self) -> None:
        """Stamp a new file, migrate an older one forward in one transaction, refuse a newer one."""
        with self._tx() as db:
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            found = SCHEMA_VERSION if row is None else int(row[0])
            if found > SCHEMA_VERSION or found < 1:
                raise SchemaMismatch(f"{self.path}: schema {found}, this code expects {SCHEMA_VERSION}")
            have = {r[1] for r in db.execute("PRAGMA table_info(pog_results)")}
            for version in range(2, SCHEMA_VERSION + 1):
                for column in _MIGRATIONS[version]:
                    if column.split()[0] not in have:  # a fresh file gets every column here too
                        db.execute(f"ALTER TABLE pog_results ADD COLUMN {column}")
            db.execute(
                "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (str(SCHEMA_VERSION),),
            )
        if row is not None and found < SCHEMA_VERSION:
            log.info("validator store %s migrated from schema %d to %d", self.path, found, SCHEMA_VERSION)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, immediate(self._db) as db:
            yield db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------ miners

    def sync_miners(self, miners: Iterable[tuple[int, str]]) -> list[int]:
        """Record uid -> hotkey; a uid whose hotkey changed loses its score. Returns reset uids."""
        now = self._clock()
        reset: list[int] = []
        with self._tx() as db:
            known = dict(db.execute("SELECT uid, hotkey FROM miners").fetchall())
            for uid, hotkey in miners:
                if known.get(uid) == hotkey:
                    continue
                if uid in known:
                    reset.append(uid)
                    db.execute("DELETE FROM scores WHERE uid=?", (uid,))
                db.execute(
                    "INSERT INTO miners VALUES (?, ?, ?) ON CONFLICT(uid) DO UPDATE "
                    "SET hotkey=excluded.hotkey, first_seen=excluded.first_seen",
                    (uid, hotkey, now),
                )
        if reset:
            log.info("miner hotkeys changed, scores reset: uids=%s", reset)
        return reset

    def miners(self) -> dict[int, str]:
        with self._lock:
            return dict(self._db.execute("SELECT uid, hotkey FROM miners").fetchall())

    # ------------------------------------------------------------ rounds

    def begin_round(self, block: int) -> RoundRecord:
        """The unfinished round to resume after a restart, or a new round opened at ``block``."""
        with self._tx() as db:
            row = db.execute(
                "SELECT round_id, block, started, finished FROM rounds WHERE finished IS NULL "
                "ORDER BY round_id LIMIT 1"
            ).fetchone()
            if row is not None:
                return RoundRecord(*row)
            started = self._clock()
            cur = db.execute("INSERT INTO rounds (block, started) VALUES (?, ?)", (block, started))
            assert cur.lastrowid is not None  # an INSERT into a rowid table always sets it
            return RoundRecord(cur.lastrowid, block, started, None)

    def round(self, round_id: int) -> RoundRecord | None:
        with self._lock:
            row = self._db.execute(
                "SELECT round_id, block, started, finished FROM rounds WHERE round_id=?", (round_id,)
            ).fetchone()
        return RoundRecord(*row) if row else None

    def rounds_finished(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM rounds WHERE finished IS NOT NULL").fetchone()[0]

    def finish_round(self, round_id: int, updates: Iterable[ScoreUpdate]) -> int:
        """Apply ``updates`` and close the round, atomically. Returns how many updates were applied.

        Raises ``RoundAlreadyFinished`` (and changes nothing) when the round was closed before.
        """
        now = self._clock()
        applied = 0
        with self._tx() as db:
            row = db.execute("SELECT finished FROM rounds WHERE round_id=?", (round_id,)).fetchone()
            if row is None:
                raise StoreError(f"unknown round {round_id}")
            if row[0] is not None:
                raise RoundAlreadyFinished(f"round {round_id} finished at {row[0]}")
            for update in updates:
                if not math.isfinite(update.score) or update.score < 0:
                    raise StoreError(f"refusing score {update.score!r} for uid {update.uid}")
                prev = db.execute("SELECT score FROM scores WHERE uid=?", (update.uid,)).fetchone()
                cur = db.execute(
                    "INSERT INTO score_updates VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (round_id, update.uid, update.hotkey, prev[0] if prev else None, update.score),
                )
                if cur.rowcount != 1:
                    continue
                db.execute(
                    "INSERT INTO scores VALUES (?, ?, ?, ?) ON CONFLICT(uid) DO UPDATE "
                    "SET hotkey=excluded.hotkey, score=excluded.score, updated=excluded.updated",
                    (update.uid, update.hotkey, update.score, now),
                )
                applied += 1
            db.execute("UPDATE rounds SET finished=? WHERE round_id=?", (now, round_id))
        return applied

    # ------------------------------------------------------------ results

    def record_result(self, result: PogResult) -> bool:
        """Persist one miner's result; False when that (round, uid) already has one (kept as is)."""
        with self._tx() as db:
            cur = db.execute(
                f"INSERT INTO pog_results ({', '.join(_RESULT_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_RESULT_COLUMNS))}) ON CONFLICT DO NOTHING",
                (
                    result.round_id,
                    result.uid,
                    result.hotkey,
                    int(result.ok),
                    float(result.sample),
                    int(result.rented),
                    json.dumps(list(result.reasons)),
                    json.dumps(list(result.models)),
                    result.tflops_fp16,
                    result.tflops_fp32,
                    result.gpu_count,
                    json.dumps(dict(result.timings)),
                    result.block,
                    result.created or self._clock(),
                    result.mem_gbs,
                    result.mem_proven_gb,
                    result.sustained_ratio,
                    result.sustained_factor,
                    result.scaling_efficiency,
                    result.credited_gpus,
                    json.dumps(dict(result.host)),
                    json.dumps(list(result.gpu_uuids)),
                    result.depth_round,
                    int(result.history_reset),
                    result.rented_fraction,
                    result.availability,
                    result.rental_uptime,
                    json.dumps(list(result.shared_with)),
                    json.dumps(dict(result.hosts)),
                ),
            )
            return cur.rowcount == 1

    def revise_result(self, result: PogResult) -> bool:
        """Overwrite the sample and reasons of a recorded result (a verdict reached after the whole
        round, e.g. a device shared by several hotkeys credited once); False if there is no row."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE pog_results SET sample=?, reasons=?, shared_with=? WHERE round_id=? AND uid=? AND hotkey=?",
                (
                    float(result.sample),
                    json.dumps(list(result.reasons)),
                    json.dumps(list(result.shared_with)),
                    result.round_id,
                    result.uid,
                    result.hotkey,
                ),
            )
            return cur.rowcount == 1

    def results(self, round_id: int) -> list[PogResult]:
        with self._lock:
            rows = self._db.execute(f"{_SELECT_RESULT} WHERE round_id=? ORDER BY uid", (round_id,)).fetchall()
        return [_result(row) for row in rows]

    def tested_uids(self, round_id: int) -> set[int]:
        with self._lock:
            rows = self._db.execute("SELECT uid FROM pog_results WHERE round_id=?", (round_id,))
            return {row[0] for row in rows}

    def last_verified(self, uid: int, hotkey: str) -> PogResult | None:
        """The latest result that verified a GPU machine for this (uid, hotkey), if any."""
        with self._lock:
            row = self._db.execute(
                f"{_SELECT_RESULT} WHERE uid=? AND hotkey=? AND ok=1 AND rented=0 ORDER BY round_id DESC LIMIT 1",
                (uid, hotkey),
            ).fetchone()
        return _result(row) if row else None

    def failures_since(self, since: float, hotkey: str | None = None) -> list[PogResult]:
        """Failed, not rented results recorded after ``since`` (this validator's clock), oldest first;
        only ``hotkey``'s when given (what the collateral desk reads its own cheat verdicts from)."""
        query = f"{_SELECT_RESULT} WHERE ok=0 AND rented=0 AND created>?"
        args: tuple = (since,)
        if hotkey is not None:
            query, args = query + " AND hotkey=?", (since, hotkey)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY created, uid", args).fetchall()
        return [_result(row) for row in rows]

    def last_whole_verification(self, uid: int, hotkey: str) -> PogResult | None:
        """The latest result that verified every GPU of the machine (not only the free GPUs of a
        partly rented one): what its rented GPUs are credited from."""
        with self._lock:
            row = self._db.execute(
                f"{_SELECT_RESULT} WHERE uid=? AND hotkey=? AND ok=1 AND rented=0"
                " AND (rented_fraction IS NULL OR rented_fraction = 0) ORDER BY round_id DESC LIMIT 1",
                (uid, hotkey),
            ).fetchone()
        return _result(row) if row else None

    def gpu_uuids(self, uid: int, hotkey: str) -> tuple[str, ...] | None:
        """The GPU UUID set of the miner's latest verified machine (None: never verified or none reported)."""
        previous = self.last_verified(uid, hotkey)
        return previous.gpu_uuids if previous is not None and previous.gpu_uuids else None

    # ------------------------------------------------------------ scores and weights

    def scores(self) -> dict[int, ScoreRecord]:
        with self._lock:
            rows = self._db.execute("SELECT uid, hotkey, score, updated FROM scores").fetchall()
        return {row[0]: ScoreRecord(*row) for row in rows}

    def log_weights(
        self, block: int, weights: Mapping[int, float], version_key: int, ok: bool, error: str | None = None
    ) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO weights_set (block, weights, version_key, ok, error, created) VALUES (?,?,?,?,?,?)",
                (
                    block,
                    json.dumps({str(k): v for k, v in weights.items()}),
                    version_key,
                    int(ok),
                    error,
                    self._clock(),
                ),
            )

    def last_weights(self, ok_only: bool = True) -> WeightsRecord | None:
        where = "WHERE ok=1" if ok_only else ""
        with self._lock:
            row = self._db.execute(
                f"SELECT block, weights, version_key, ok, error, created FROM weights_set {where} "
                "ORDER BY id DESC LIMIT 1"
            ).fetchone()
        if row is None:
            return None
        weights = {int(k): float(v) for k, v in json.loads(row[1]).items()}
        return WeightsRecord(row[0], weights, row[2], bool(row[3]), row[4], row[5])


def _result(row: tuple) -> PogResult:
    (
        round_id,
        uid,
        hotkey,
        ok,
        sample,
        rented,
        reasons,
        models,
        f16,
        f32,
        gpus,
        timings,
        block,
        created,
        mem_gbs,
        mem_proven,
        s_ratio,
        s_factor,
        scaling,
        credited,
        host,
        uuids,
        depth_round,
        reset,
        rented_fraction,
        availability,
        rental_uptime,
        shared_with,
        hosts,
    ) = row
    return PogResult(
        round_id=round_id,
        uid=uid,
        hotkey=hotkey,
        ok=bool(ok),
        sample=sample,
        reasons=tuple(json.loads(reasons)),
        models=tuple(json.loads(models)),
        tflops_fp16=f16,
        tflops_fp32=f32,
        gpu_count=gpus,
        rented=bool(rented),
        timings=json.loads(timings),
        block=block,
        created=created,
        mem_gbs=mem_gbs,
        mem_proven_gb=mem_proven,
        sustained_ratio=s_ratio,
        sustained_factor=s_factor,
        scaling_efficiency=scaling,
        credited_gpus=credited,
        host=json.loads(host or "{}"),
        gpu_uuids=tuple(json.loads(uuids or "[]")),
        depth_round=depth_round,
        history_reset=bool(reset),
        rented_fraction=rented_fraction,
        availability=availability,
        rental_uptime=rental_uptime,
        shared_with=tuple(json.loads(shared_with or "[]")),
        hosts={str(k): float(v) for k, v in json.loads(hosts or "{}").items()},
    )
