"""The offers table: what each miner last answered the validator's availability probe (a canary's look).

One row per hotkey, replaced at each probe: when, the asking price the miner signed in that answer
(JSON of ``compute.protocol.Price``, or NULL when it names none), how many GPUs it reported free and
how many leases active. The public feed shows it, with its age, as the miner's price and whether it
was free when last seen. Informational only: nothing that scores a miner reads this table.

An additive table in the validator's store file (created on open; older files gain it, older code
ignores it, and a reader of a file without it sees no offers).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

OFFERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS offers (
    hotkey TEXT PRIMARY KEY,
    uid INTEGER NOT NULL,
    at REAL NOT NULL,
    price TEXT,
    free_gpus INTEGER,
    active_leases INTEGER
);
"""

MAX_PRICE_JSON = 16_384  # a Price is at most 64 names of 128 characters


@dataclass(frozen=True)
class Offer:
    """One miner's answer to the validator's latest availability probe (what the miner said)."""

    at: float  # the validator's clock, when it asked
    price_json: str | None = None  # the signed ``Price`` it answered with (None: it names none)
    free_gpus: int | None = None
    active_leases: int | None = None


class OfferTables:
    """Mixed into ``ValidatorStore`` (which provides the connection and its transactions)."""

    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _lock: threading.RLock

    def record_offer(self, uid: int, hotkey: str, offer: Offer) -> None:
        """Keep ``offer`` as the miner's latest (one transaction; an older one is replaced)."""
        price = offer.price_json if offer.price_json and len(offer.price_json) <= MAX_PRICE_JSON else None
        with self._tx() as db:
            db.execute(
                "INSERT INTO offers VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(hotkey) DO UPDATE SET "
                "uid=excluded.uid, at=excluded.at, price=excluded.price, free_gpus=excluded.free_gpus, "
                "active_leases=excluded.active_leases",
                (hotkey, uid, offer.at, price, offer.free_gpus, offer.active_leases),
            )


def read_offers(conn: sqlite3.Connection) -> dict[str, Offer]:
    """Every miner's latest offer by hotkey (none from a store file older than the table)."""
    try:
        rows = conn.execute("SELECT hotkey, at, price, free_gpus, active_leases FROM offers").fetchall()
    except sqlite3.OperationalError:  # no such table: written by code that predates it
        return {}
    return {hotkey: Offer(at, price, free, active) for hotkey, at, price, free, active in rows}


__all__ = ["OFFERS_SCHEMA", "Offer", "OfferTables", "read_offers"]
