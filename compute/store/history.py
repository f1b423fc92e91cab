"""Read-only overview queries on a validator store: what a dashboard shows in one snapshot.

``overview(path)`` returns every known miner with its latest verdict, latest *verified* figures,
current score and weight, the score and weight history sampled to at most ``points`` instants over
the last ``days`` days, and the progress of the newest round. History is sampled (not averaged):
it picks evenly spaced rounds / weight settings and reads only those through the primary keys, so
the cost stays flat however long the validator has run (30 days x 256 miners reads ~15k rows).

Deliberately not here: HTML, HTTP, writing, or trusting anything a miner reported (every figure
is what the validator stored from its own measurements).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from compute.store.readonly import open_readonly
from compute.store.records import PogResult
from compute.store.store import _RESULT_COLUMNS, _result

log = logging.getLogger(__name__)

DAY_S = 86_400.0

# Driven by the (small) miners table: one index seek per miner, whatever the history length.
_LATEST_PER_UID = f"""
SELECT {", ".join("r." + c for c in _RESULT_COLUMNS)} FROM miners AS m CROSS JOIN pog_results AS r
ON r.uid = m.uid AND r.round_id = (SELECT MAX(round_id) FROM pog_results WHERE uid = m.uid)
"""
_VERIFIED_PER_MINER = f"""
SELECT {", ".join("r." + c for c in _RESULT_COLUMNS)} FROM miners AS m CROSS JOIN pog_results AS r
ON r.hotkey = m.hotkey AND r.round_id = (
    SELECT MAX(round_id) FROM pog_results WHERE hotkey = m.hotkey AND ok = 1 AND rented = 0
) AND r.ok = 1 AND r.rented = 0
"""
TOP_WEIGHTS = 8


@dataclass(frozen=True)
class MinerOverview:
    """One miner as the validator sees it now; ``latest`` may be a failure, ``verified`` never is."""

    uid: int
    hotkey: str
    score: float | None = None
    weight: float | None = None
    latest: PogResult | None = None
    verified: PogResult | None = None


@dataclass(frozen=True)
class RoundProgress:
    """The newest round: how many of the known miners it has tested and passed so far."""

    round_id: int
    block: int
    started: float
    finished: float | None
    tested: int
    passed: int
    miners: int


@dataclass(frozen=True)
class Overview:
    """A consistent snapshot (one read transaction) of the store for a dashboard."""

    generated: float
    miners: tuple[MinerOverview, ...]
    score_history: Mapping[int, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    weight_history: Mapping[int, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    round: RoundProgress | None = None
    rounds_finished: int = 0


def _even_sample(rows: list[tuple], points: int) -> list[tuple]:
    """At most ``points`` rows, evenly spaced, always keeping the last one."""
    if len(rows) <= points:
        return rows
    step = (len(rows) - 1) / (points - 1)
    return [rows[round(i * step)] for i in range(points)]


def _score_history(
    conn: sqlite3.Connection, since: float, points: int
) -> dict[int, tuple[tuple[float, float], ...]]:
    rounds = conn.execute(
        "SELECT round_id, COALESCE(finished, started) FROM rounds "
        "WHERE finished IS NOT NULL AND started >= ? ORDER BY round_id",
        (since,),
    ).fetchall()
    picked = dict(_even_sample(rounds, points))
    if not picked:
        return {}
    marks = ",".join("?" * len(picked))
    rows = conn.execute(
        f"SELECT round_id, uid, score FROM score_updates WHERE round_id IN ({marks}) ORDER BY round_id",
        tuple(picked),
    ).fetchall()
    history: dict[int, list[tuple[float, float]]] = {}
    for round_id, uid, score in rows:
        history.setdefault(uid, []).append((picked[round_id], float(score)))
    return {uid: tuple(series) for uid, series in history.items()}


def _weight_history(
    conn: sqlite3.Connection, since: float, points: int
) -> tuple[dict[int, tuple[tuple[float, float], ...]], dict[int, float]]:
    ids = conn.execute(
        "SELECT id, created FROM weights_set WHERE ok = 1 AND created >= ? ORDER BY id", (since,)
    ).fetchall()
    picked = dict(_even_sample(ids, points))
    latest_row = conn.execute(
        "SELECT weights FROM weights_set WHERE ok = 1 ORDER BY id DESC LIMIT 1"
    ).fetchone()
    current = _weights(latest_row[0]) if latest_row else {}
    if not picked:
        return {}, current
    marks = ",".join("?" * len(picked))
    rows = conn.execute(
        f"SELECT id, weights FROM weights_set WHERE id IN ({marks}) ORDER BY id", tuple(picked)
    ).fetchall()
    leaders = sorted(current, key=lambda uid: current[uid], reverse=True)[:TOP_WEIGHTS]
    history: dict[int, list[tuple[float, float]]] = {uid: [] for uid in leaders}
    for row_id, blob in rows:
        weights = _weights(blob)
        for uid in leaders:
            if uid in weights:
                history[uid].append((picked[row_id], weights[uid]))
    return {uid: tuple(series) for uid, series in history.items() if series}, current


def _weights(blob: str) -> dict[int, float]:
    try:
        return {int(k): float(v) for k, v in json.loads(blob).items()}
    except (ValueError, TypeError, AttributeError) as exc:
        log.warning("skipping unreadable weights row: %s", exc)
        return {}


def _progress(conn: sqlite3.Connection, miners: int) -> tuple[RoundProgress | None, int]:
    finished = conn.execute("SELECT COUNT(*) FROM rounds WHERE finished IS NOT NULL").fetchone()[0]
    row = conn.execute(
        "SELECT round_id, block, started, finished FROM rounds ORDER BY round_id DESC LIMIT 1"
    ).fetchone()
    if row is None:
        return None, finished
    tested, passed = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(ok), 0) FROM pog_results WHERE round_id = ?", (row[0],)
    ).fetchone()
    return RoundProgress(row[0], row[1], row[2], row[3], tested, passed, miners), finished


def _parse_results(rows: list[tuple]) -> list[PogResult]:
    parsed = []
    for row in rows:
        try:
            parsed.append(_result(row))
        except (ValueError, TypeError) as exc:  # a corrupt JSON column: skip that row only
            log.warning("skipping unreadable PoG result uid=%s: %s", row[1], exc)
    return parsed


def overview(path: str | Path, days: float = 30.0, points: int = 40, now: float | None = None) -> Overview:
    """The dashboard snapshot of the store at ``path`` (see the module docstring).

    Raises ``StoreError`` / ``SchemaMismatch`` like ``verified_machines``.
    """
    now = time.time() if now is None else now
    since = now - days * DAY_S
    with open_readonly(path) as conn:
        conn.execute("BEGIN")  # one read transaction: every table from the same instant
        miners = conn.execute("SELECT uid, hotkey FROM miners ORDER BY uid").fetchall()
        scores = dict(conn.execute("SELECT uid, score FROM scores").fetchall())
        latest = {r.uid: r for r in _parse_results(conn.execute(_LATEST_PER_UID).fetchall())}
        verified = {r.hotkey: r for r in _parse_results(conn.execute(_VERIFIED_PER_MINER).fetchall())}
        score_history = _score_history(conn, since, points)
        weight_history, current = _weight_history(conn, since, points)
        progress, finished = _progress(conn, len(miners))
        conn.execute("COMMIT")
    rows = tuple(
        MinerOverview(
            uid=uid,
            hotkey=hotkey,
            score=scores.get(uid),
            weight=current.get(uid),
            latest=latest[uid] if uid in latest and latest[uid].hotkey == hotkey else None,
            verified=verified.get(hotkey),
        )
        for uid, hotkey in miners
    )
    return Overview(now, rows, score_history, weight_history, progress, finished)
