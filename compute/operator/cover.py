"""Before a renter rents: the miner's standing collateral and pending reclaim, read from the contract.

A rental is covered only while its failure can still be slashed: its term must end
``RENTER_MARGIN_S`` (the validators' dead run and assembly) before a pending reclaim of the miner's
deposit matures, and before a reclaim asked at the rental's start would (the contract's reclaim
delay): ``compute.collateral.covered_until``. With ``--collateral.rpc`` and ``--collateral.address``
(or the SDK's ``collateral_rpc``/``collateral_address``), register.py and the SDK read each
candidate miner's deposit before renting from it, show it (``resources``, ``allocate``), and, when
the renter asked to be made whole (``--register.renter_evm``), never rent a term the collateral does
not cover: such a miner is skipped (or, when named, refused) with the reason.

Only the contract's numbers count: a miner's word about its deposit is never read. A contract that
cannot be read covers nothing (the renter asked for cover and cannot be shown any); each JSON-RPC
call is bounded (``compute.collateral.rpc``), a read at most ``READ_TIMEOUT_S``, and once the
endpoint failed the next ``DOWN_S`` seconds of reads fail at once, so a misbehaving endpoint never
holds an allocation over its candidates one by one.

Deliberately not here: renting (``service.Operator.allocate`` asks this first) or claiming
(``commands_collateral``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from compute.collateral import covered_until
from compute.operator.errors import UsageError

logger = logging.getLogger(__name__)
WEI_PER_TAO = 10**18
READ_TIMEOUT_S = 20.0
DOWN_S = 60.0  # after the endpoint failed, covers read as its failure at once for this long


@dataclass(frozen=True)
class Cover:
    """A miner's collateral as the contract shows it now, and the latest term end it covers."""

    hotkey: str
    deposit_wei: int
    pending_reclaim_wei: int
    reclaim_at: int  # chain time the pending reclaim matures (0: none)
    covered_until: float  # a lease ending later is not slashable for its failure
    error: str | None = None  # the contract could not be read: nothing is covered

    @property
    def standing_wei(self) -> int:
        return max(0, self.deposit_wei - self.pending_reclaim_wei)

    def why_not(self, term_end: float) -> str | None:
        """Why a lease ending at ``term_end`` is not covered (None: it is)."""
        if self.error is not None:
            return f"its collateral could not be read ({self.error})"
        if self.standing_wei <= 0:
            pending = " (all of it is being reclaimed)" if self.deposit_wei else ""
            return f"it has no collateral standing{pending}"
        if term_end > self.covered_until:
            if self.pending_reclaim_wei:
                return (
                    f"it is reclaiming {self.pending_reclaim_wei / WEI_PER_TAO:g} TAO of its collateral at "
                    f"{self.reclaim_at:.0f}: only a lease ending by {self.covered_until:.0f} is covered"
                )
            return f"the collateral covers a lease ending by {self.covered_until:.0f} at most"
        return None

    def json(self) -> dict[str, Any]:
        return {
            "hotkey": self.hotkey,
            "deposit_tao": self.deposit_wei / WEI_PER_TAO,
            "standing_tao": self.standing_wei / WEI_PER_TAO,
            "pending_reclaim_tao": self.pending_reclaim_wei / WEI_PER_TAO,
            "reclaim_at": self.reclaim_at or None,
            "covered_until": None if self.error else self.covered_until,
            "error": self.error,
        }

    def line(self) -> str:
        if self.error is not None:
            return f"collateral unreadable ({self.error})"
        text = f"collateral {self.standing_wei / WEI_PER_TAO:g} TAO standing"
        if self.pending_reclaim_wei:
            text += (
                f", {self.pending_reclaim_wei / WEI_PER_TAO:g} TAO being reclaimed at {self.reclaim_at:.0f}"
            )
        return text


class CollateralReader:
    """The contract at ``address`` over ``rpc``, read-only (needs the ``collateral`` extra)."""

    def __init__(self, rpc: str, address: str, timeout_s: float = READ_TIMEOUT_S) -> None:
        try:
            from compute.collateral.chain import CollateralClient
            from compute.collateral.rpc import DEADLINE_S, RpcLimits, bounded_web3
        except ImportError as error:
            raise UsageError(
                f"--collateral.rpc needs the collateral extra: pip install -e '.[collateral]' ({error})"
            ) from None
        try:
            limits = RpcLimits(deadline_s=min(DEADLINE_S, timeout_s))  # each call; the read: timeout_s
            self.client = CollateralClient(bounded_web3(rpc, limits), address)
        except Exception as error:  # noqa: BLE001 - a malformed address or URL: the renter's input
            raise UsageError(f"--collateral.address/--collateral.rpc: {error}") from None
        self.timeout_s = timeout_s
        self._delay: int | None = None
        self._down: tuple[float, str] | None = None  # (monotonic until, why): the endpoint failed

    def _read(self, hotkey: str, now: float) -> Cover:
        if self._delay is None:
            self._delay = self.client.reclaim_delay()
        deposit = self.client.deposit_of(hotkey)
        until = covered_until(now, self._delay, deposit.pending_reclaim, deposit.reclaim_at)
        return Cover(hotkey, deposit.amount, deposit.pending_reclaim, deposit.reclaim_at, until)

    async def cover(self, hotkey: str, now: float) -> Cover:
        from compute.collateral import ChainUnavailable, CollateralError

        if self._down is not None and time.monotonic() < self._down[0]:
            return Cover(hotkey, 0, 0, 0, now, error=self._down[1])
        try:
            return await asyncio.wait_for(asyncio.to_thread(self._read, hotkey, now), self.timeout_s)
        except (CollateralError, OSError, asyncio.TimeoutError) as error:
            why = str(error) or f"{self.client.where}: no answer within {self.timeout_s:g} s"
            if not isinstance(error, CollateralError) or isinstance(error, ChainUnavailable):
                self._down = (time.monotonic() + DOWN_S, why)
            logger.warning("collateral of hotkey=%s unread: %s", hotkey[:10], why)
            return Cover(hotkey, 0, 0, 0, now, error=why)


__all__ = ["Cover", "CollateralReader"]
