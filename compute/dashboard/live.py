"""What the dashboard reads beyond the overview: each miner's newest sighting (a presence check or a
round, whichever is newer) for its lease state now, presence shares, and one miner's detail.

*Lease state now* is the newest thing the validator saw of the machine, never only the last round:
presence checks run between rounds, and a machine whose GPUs sat in verified leases at the newest
one is "rented" (or "partly rented") there, even if the round before found it free. Every state
carries the time it was seen, so a page can show its age and mark it stale.

A presence verdict's reason is private (it can name lockstep timings and hosts): only whether it
found the GPUs rented, present or absent is read from it, never shown. Deliberately not here: HTML,
HTTP, writing; tables an older store lacks read as empty.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from compute.scoring import DEFAULT_WINDOW, presence_shares
from compute.store import PogResult
from compute.store.readonly import open_readonly
from compute.store.store import _RESULT_COLUMNS, _result

STALE_S = 3600.0  # a sighting older than this is marked stale on the pages


@dataclass(frozen=True)
class Sighting:
    """The newest presence verdict on a hotkey: when, the share of its GPUs found, and whether rented."""

    at: float
    fraction: float
    rented: bool


@dataclass(frozen=True)
class LeaseState:
    """What the machine was doing at the newest sighting: ``label`` and when it was seen."""

    label: str  # "free", "rented", "partly rented", "absent", "failed", "not tested"
    at: float | None = None
    source: str = ""  # "presence check" or "round N"
    detail: str = ""


def _from_result(result: PogResult) -> LeaseState:
    source = f"round {result.round_id}"
    if not result.ok:
        return LeaseState("failed", result.created, source)
    if result.rented:
        share = f"{result.rented_fraction:.0%} of GPUs" if result.rented_fraction else ""
        return LeaseState("rented", result.created, source, share)
    if result.rented_fraction:
        return LeaseState("partly rented", result.created, source, f"{result.rented_fraction:.0%} of GPUs")
    return LeaseState("free", result.created, source)


def _from_sighting(seen: Sighting) -> LeaseState:
    source = "presence check"
    if seen.rented:
        label = "rented" if seen.fraction >= 1.0 or seen.fraction <= 0 else "partly rented"
        return LeaseState(label, seen.at, source)
    if seen.fraction <= 0:
        return LeaseState("absent", seen.at, source)
    return LeaseState("free", seen.at, source)


def lease_state(latest: PogResult | None, seen: Sighting | None) -> LeaseState:
    """The newer of the latest round result and the latest presence verdict, as a lease state."""
    candidates = []
    if latest is not None:
        candidates.append(_from_result(latest))
    if seen is not None:
        candidates.append(_from_sighting(seen))
    if not candidates:
        return LeaseState("not tested")
    return max(candidates, key=lambda state: state.at or 0.0)


@dataclass(frozen=True)
class PresenceView:
    """Per hotkey: its newest sighting and its presence share (None: no check yet)."""

    sightings: dict[str, Sighting] = field(default_factory=dict)
    shares: dict[str, float] | None = None


_NEWEST_VERDICT = """
SELECT m.hotkey, c.at, v.fraction, v.reason FROM miners AS m
JOIN presence_verdicts AS v ON v.hotkey = m.hotkey AND v.check_id = (
    SELECT MAX(check_id) FROM presence_verdicts WHERE hotkey = m.hotkey
)
JOIN presence_checks AS c ON c.check_id = v.check_id
"""


def _presence(conn: sqlite3.Connection, window: int) -> PresenceView:
    try:
        newest = conn.execute(_NEWEST_VERDICT).fetchall()
        checks = conn.execute(
            "SELECT check_id FROM presence_checks ORDER BY check_id DESC LIMIT ?", (max(1, window),)
        ).fetchall()
        rows = (
            conn.execute(
                "SELECT check_id, hotkey, fraction FROM presence_verdicts WHERE check_id >= ?",
                (checks[-1][0],),
            ).fetchall()
            if checks
            else []
        )
    except sqlite3.OperationalError:  # a store older than the presence log
        return PresenceView()
    by_check: dict[int, dict[str, float]] = {check_id: {} for (check_id,) in checks}
    for check_id, hotkey, fraction in rows:
        by_check.setdefault(check_id, {})[hotkey] = float(fraction)
    sightings = {
        hotkey: Sighting(float(at), float(fraction), "rented" in str(reason) and float(fraction) > 0)
        for hotkey, at, fraction, reason in newest
    }
    return PresenceView(sightings, presence_shares([by_check[c] for c in sorted(by_check)], window))


def presence_view(path: str | Path, window: int = DEFAULT_WINDOW) -> PresenceView:
    """The presence log of the store at ``path`` as the pages use it (raises ``StoreError``)."""
    with open_readonly(path) as conn:
        return _presence(conn, window)


@dataclass(frozen=True)
class ScoreStep:
    """The score before and after the round of a result (``score_updates``)."""

    round_id: int
    previous: float | None
    score: float


@dataclass(frozen=True)
class MinerDetail:
    """One miner for its page: its results (newest first), the score steps of their rounds."""

    uid: int
    hotkey: str
    generated: float
    results: tuple[PogResult, ...]
    steps: dict[int, ScoreStep]
    score: float | None
    weight: float | None
    presence: PresenceView


def miner_detail(
    path: str | Path, uid: int, *, rounds: int = 12, window: int = DEFAULT_WINDOW, now: float | None = None
) -> MinerDetail | None:
    """Miner ``uid`` of the store at ``path`` (None: no such miner). Raises ``StoreError``."""
    with open_readonly(path) as conn:
        conn.execute("BEGIN")  # one read transaction
        row = conn.execute("SELECT hotkey FROM miners WHERE uid = ?", (uid,)).fetchone()
        if row is None:
            conn.execute("COMMIT")
            return None
        hotkey = row[0]
        rows = conn.execute(
            f"SELECT {', '.join(_RESULT_COLUMNS)} FROM pog_results WHERE uid = ? AND hotkey = ? "
            "ORDER BY round_id DESC LIMIT ?",
            (uid, hotkey, rounds),
        ).fetchall()
        steps = {
            r: ScoreStep(r, prev, score)
            for r, prev, score in conn.execute(
                "SELECT round_id, previous, score FROM score_updates WHERE uid = ? AND hotkey = ? "
                "ORDER BY round_id DESC LIMIT ?",
                (uid, hotkey, rounds * 4),
            ).fetchall()
        }
        score = conn.execute(
            "SELECT score FROM scores WHERE uid = ? AND hotkey = ?", (uid, hotkey)
        ).fetchone()
        weights = conn.execute(
            "SELECT weights FROM weights_set WHERE ok = 1 ORDER BY id DESC LIMIT 1"
        ).fetchone()
        presence = _presence(conn, window)
        conn.execute("COMMIT")
    results = []
    for values in rows:
        try:
            results.append(_result(values))
        except (ValueError, TypeError):  # a corrupt JSON column: that round is left out
            continue
    try:
        weight = float(json.loads(weights[0]).get(str(uid))) if weights else None
    except (ValueError, TypeError, AttributeError):
        weight = None
    return MinerDetail(
        uid=uid,
        hotkey=hotkey,
        generated=time.time() if now is None else now,
        results=tuple(results),
        steps=steps,
        score=float(score[0]) if score else None,
        weight=weight,
        presence=PresenceView(
            {hotkey: presence.sightings[hotkey]} if hotkey in presence.sightings else {},
            {hotkey: (presence.shares or {}).get(hotkey, 0.0)} if presence.shares is not None else None,
        ),
    )


__all__ = [
    "STALE_S",
    "LeaseState",
    "MinerDetail",
    "PresenceView",
    "ScoreStep",
    "Sighting",
    "lease_state",
    "miner_detail",
    "presence_view",
]
