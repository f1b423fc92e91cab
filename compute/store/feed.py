"""Read-only history queries for the public machine feed: per miner, what this validator proved
and how often its tests found the machine there, over the last 7 and 30 days.

Everything comes from the validator's own results (``pog_results``: one row per test it ran, at a
moment it chose): the latest proven figures (a passing, non-rented test), the first and last proof,
counts per UTC day of tests run / passed / passed-while-rented, and the last few verdicts; and,
beside them, each miner's latest answer to the validator's availability probe (``offers``: its signed
price, free GPUs, active leases; what the miner said, shown as such). A miner's other
reported names, UUIDs, endpoints and refusal texts are never read here.

Cost stays flat in the store's age and small per read: ``FeedReader`` keeps the daily counts of
finished rounds and reads only new rows through the ``pog_results`` primary key; the per-miner reads
are index seeks (the ``miners`` table is small).

Deliberately not here: HTTP, signing, what to publish (``compute.dashboard.feed`` decides that).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path

from compute.store.history import _VERIFIED_PER_MINER, DAY_S, _parse_results
from compute.store.offers import Offer, read_offers
from compute.store.readonly import open_readonly
from compute.store.records import PogResult

WINDOWS_DAYS = (7, 30)
RECENT = 16  # individual verdicts kept per machine


@dataclass(frozen=True)
class DayCount:
    """Tests of one miner in one UTC day."""

    tested: int = 0
    passed: int = 0
    rented: int = 0  # passed while its GPUs were under a verified rental

    def __add__(self, other: DayCount) -> DayCount:
        return DayCount(self.tested + other.tested, self.passed + other.passed, self.rented + other.rented)


@dataclass(frozen=True)
class MachineHistory:
    uid: int
    hotkey: str
    proven: PogResult | None  # the latest passing, non-rented test: the figures proven
    first_proven: float | None  # when a test of this hotkey first passed (not rented)
    last_passed: float | None  # the latest passing test (rented or not)
    days: tuple[DayCount, ...]  # one per UTC day, today first (``days`` of them)
    recent: tuple[tuple[float, str], ...]  # (time, "verified" | "rented" | "failed"), the newest last
    offer: Offer | None = None  # its latest answer to the validator's availability probe (what it said)

    def window(self, days: int) -> DayCount:
        """Today and the ``days - 1`` UTC days before it."""
        return sum(self.days[:days], DayCount())


@dataclass(frozen=True)
class FeedHistory:
    generated: float
    days: int
    machines: tuple[MachineHistory, ...]


def _day(ts: float) -> int:
    return int(ts // DAY_S)


class FeedReader:
    """Reads the feed's history, keeping the daily counts of finished rounds between reads.

    A finished round's results never change, so each read scans only the rows of rounds finished
    since the previous read (and of rounds still open), through the ``pog_results`` primary key;
    the first read scans the window once. Counts are per UTC day, so a day's count is final once
    the day is over. Not thread-safe: one reader per dashboard (its callers serialise reads)."""

    def __init__(self, path: str | Path, days: int = max(WINDOWS_DAYS), recent: int = RECENT) -> None:
        self.path = Path(path).expanduser()
        self.days = days
        self.recent = recent
        self._counts: dict[tuple[str, int], DayCount] = {}  # (hotkey, UTC day) -> finished rounds' tests
        self._through = 0  # every round up to this id is finished and counted

    def read(self, now: float | None = None) -> FeedHistory:
        """The history of every registered miner (one read transaction); ``StoreError`` /
        ``SchemaMismatch`` like ``verified_machines``."""
        now = time.time() if now is None else now
        first_day = _day(now) - self.days + 1
        with open_readonly(self.path) as conn:
            conn.execute("BEGIN")
            live = self._advance(conn, first_day)
            miners = conn.execute("SELECT uid, hotkey FROM miners ORDER BY uid").fetchall()
            proven = {r.hotkey: r for r in _parse_results(conn.execute(_VERIFIED_PER_MINER).fetchall())}
            offers = read_offers(conn)
            machines = tuple(
                replace(
                    self._machine(conn, uid, hotkey, proven.get(hotkey), first_day, live),
                    offer=offers.get(hotkey),
                )
                for uid, hotkey in miners
            )
            conn.execute("COMMIT")
        return FeedHistory(now, self.days, machines)

    def _advance(self, conn: sqlite3.Connection, first_day: int) -> dict[tuple[str, int], DayCount]:
        """Count the newly finished rounds into the kept counts; return the open rounds' counts."""
        top, open_round = conn.execute(
            "SELECT MAX(round_id), MIN(CASE WHEN finished IS NULL THEN round_id END) FROM rounds"
        ).fetchone()
        through = (open_round - 1) if open_round is not None else (top or 0)
        if through < self._through:  # another store (or one rebuilt): start over
            self._counts, self._through = {}, 0
        if self._through == 0:
            start = conn.execute(
                "SELECT MIN(round_id) FROM rounds WHERE started >= ?", ((first_day - 1) * DAY_S,)
            ).fetchone()[0]
            self._through = (start - 1) if start is not None else through
        _count(conn, self._counts, self._through, through, first_day)
        self._through = max(self._through, through)
        for key in [k for k in self._counts if k[1] < first_day]:
            del self._counts[key]
        live: dict[tuple[str, int], DayCount] = {}
        _count(conn, live, through, 1 << 62, first_day)
        return live

    def _machine(
        self,
        conn: sqlite3.Connection,
        uid: int,
        hotkey: str,
        proven: PogResult | None,
        first_day: int,
        live: dict[tuple[str, int], DayCount],
    ) -> MachineHistory:
        today, empty = first_day + self.days - 1, DayCount()
        days = tuple(
            self._counts.get((hotkey, d), empty) + live[(hotkey, d)]
            if (hotkey, d) in live
            else self._counts.get((hotkey, d), empty)
            for d in range(today, first_day - 1, -1)
        )
        return MachineHistory(
            uid=uid,
            hotkey=hotkey,
            proven=proven,
            first_proven=_one(
                conn,
                "SELECT created FROM pog_results WHERE hotkey = ? AND ok = 1 AND rented = 0 ORDER BY round_id LIMIT 1",
                (hotkey,),
            ),
            last_passed=_one(
                conn,
                "SELECT created FROM pog_results WHERE hotkey = ? AND ok = 1 ORDER BY round_id DESC LIMIT 1",
                (hotkey,),
            ),
            days=days,
            recent=_recent(conn, uid, hotkey, self.recent),
        )


def _count(
    conn: sqlite3.Connection, into: dict[tuple[str, int], DayCount], after: int, upto: int, first_day: int
) -> None:
    """Add the tests of rounds ``after < round_id <= upto`` on or after ``first_day`` to ``into``."""
    rows = conn.execute(
        "SELECT hotkey, created, ok, rented FROM pog_results WHERE round_id > ? AND round_id <= ? AND created >= ?",
        (after, upto, first_day * DAY_S),
    )
    for hotkey, created, ok, rented in rows:
        key = (hotkey, _day(created))
        into[key] = into.get(key, DayCount()) + DayCount(1, int(bool(ok)), int(bool(ok and rented)))


def _one(conn: sqlite3.Connection, sql: str, params: tuple) -> float | None:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else float(row[0])


def _recent(conn: sqlite3.Connection, uid: int, hotkey: str, count: int) -> tuple[tuple[float, str], ...]:
    rows = conn.execute(
        "SELECT created, ok, rented FROM pog_results WHERE uid = ? AND hotkey = ? ORDER BY round_id DESC LIMIT ?",
        (uid, hotkey, count),
    ).fetchall()
    verdicts = [
        (float(t), "failed" if not ok else "rented" if rented else "verified") for t, ok, rented in rows
    ]
    return tuple(reversed(verdicts))


def machine_history(
    path: str | Path, days: int = max(WINDOWS_DAYS), recent: int = RECENT, now: float | None = None
) -> FeedHistory:
    """The feed's history read once (a fresh ``FeedReader``; dashboards keep one instead)."""
    return FeedReader(path, days, recent).read(now)


__all__ = ["WINDOWS_DAYS", "DayCount", "FeedHistory", "FeedReader", "MachineHistory", "machine_history"]
