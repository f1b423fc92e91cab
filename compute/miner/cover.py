"""An honest miner never rents a term its collateral cannot cover.

While a reclaim of the miner's own deposit is pending, a rental ending later than
``RENTER_MARGIN_S`` before the reclaim matures could die after the money is gone: its renter could
not be paid. :class:`ReclaimGuard` reads the miner's deposit from the contract (every
``refresh_s``) and gives the latest term end the miner still accepts; the allocate route refuses
longer rentals, and the availability answer's ``max_duration_s`` shows the cap to renters before
they ask. Renters' tools check the same on their side (``compute.operator.cover``): this is the
honest miner's half, never what a renter's protection rests on.

A contract it cannot read keeps the last value read (none: no cap): the guard only ever refuses.
A failed read is tried again only after ``refresh_s``, like a good one: an endpoint that stalls
(each call bounded by ``compute.collateral.rpc``) delays one request a refresh period, not every one.
What it deliberately does not do: touch the deposit (``python -m compute collateral``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compute.collateral import CollateralError
from compute.collateral.windows import RENTER_MARGIN_S

logger = logging.getLogger(__name__)
REFRESH_S = 60.0
READ_TIMEOUT_S = 20.0


@dataclass
class ReclaimGuard:
    reader: Any  # compute.collateral.CollateralClient (read-only), sync: run in a thread
    hotkey: str  # this miner's hotkey: its deposit
    refresh_s: float = REFRESH_S
    clock: Callable[[], float] = time.time
    _limit: float | None = None
    _read_at: float = field(default=float("-inf"))

    async def latest_term_end(self) -> float | None:
        """The latest term end this miner accepts now (None: no reclaim pending, no cap)."""
        now = self.clock()
        if now - self._read_at >= self.refresh_s:
            self._read_at = now  # read or not, not again before refresh_s
            try:
                deposit = await asyncio.wait_for(
                    asyncio.to_thread(self.reader.deposit_of, self.hotkey), READ_TIMEOUT_S
                )
            except (CollateralError, OSError, asyncio.TimeoutError) as error:
                why = str(error) or f"no answer within {READ_TIMEOUT_S:g} s"
                logger.warning("collateral: own deposit unread (%s); keeping the last cap", why)
            else:
                pending = deposit.pending_reclaim > 0
                self._limit = deposit.reclaim_at - RENTER_MARGIN_S if pending else None
        return self._limit

    async def refusal(self, duration_s: float) -> str | None:
        """Why a rental of ``duration_s`` seconds starting now is refused (None: accepted)."""
        limit = await self.latest_term_end()
        if limit is None or self.clock() + duration_s <= limit:
            return None
        return (
            f"this miner's collateral is being reclaimed: a rental must end by {limit:.0f} "
            f"(at most {max(0, int(limit - self.clock()))} s from now) to stay covered"
        )


def build_guard(rpc: str | None, address: str | None, hotkey: str) -> ReclaimGuard | None:
    """The guard over the contract at ``address`` (None without one; needs the collateral extra)."""
    if not rpc and not address:
        return None
    if not rpc or not address:
        raise CollateralError("the collateral contract needs both --collateral.rpc and --collateral.address")
    try:
        from compute.collateral.chain import CollateralClient
        from compute.collateral.rpc import bounded_web3
    except ImportError as error:
        raise CollateralError(
            f"--collateral.rpc needs the collateral extra (pip install -e '.[collateral]'): {error}"
        ) from None
    return ReclaimGuard(CollateralClient(bounded_web3(rpc), address), hotkey)


__all__ = ["ReclaimGuard", "build_guard"]
