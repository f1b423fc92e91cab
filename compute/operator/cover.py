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
cannot be read covers nothing (the renter asked for cover and cannot be shown any).

Deliberately not here: renting (``service.Operator.allocate`` asks this first) or claiming
(``commands_collateral``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from compute.collateral import covered_until
from compute.operator.errors import UsageError

logger = logging.getLogger(__name__)
WEI_PER_TAO = 10**18
READ_TIMEOUT_S = 20.0


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
            from web3 import Web3

            from compute.collateral.chain import CollateralClient
        except ImportError as error:
            raise UsageError(
                f"--collateral.rpc needs the collateral extra: pip install -e '.[collateral]' ({error})"
            ) from None
        try:
            self.client = CollateralClient(
                Web3(Web3.HTTPProvider(rpc, request_kwargs={"timeout": timeout_s})), address
            )
        except Exception as error:  # noqa: BLE001 - a malformed address or URL: the renter's input
            raise UsageError(f"--collateral.address/--collateral.rpc: {error}") from None
        self.timeout_s = timeout_s
        self._delay: int | None = None

    def _read(self, hotkey: str, now: float) -> Cover:
        if self._delay is None:
            self._delay = int(self.client.config().reclaim_delay_s)
        deposit = self.client.deposit_of(hotkey)
        until = covered_until(now, self._delay, deposit.pending_reclaim, deposit.reclaim_at)
        return Cover(hotkey, deposit.amount, deposit.pending_reclaim, deposit.reclaim_at, until)

    async def cover(self, hotkey: str, now: float) -> Cover:
        from compute.collateral import CollateralError

        try:
            return await asyncio.wait_for(asyncio.to_thread(self._read, hotkey, now), self.timeout_s)
        except (CollateralError, OSError, asyncio.TimeoutError) as error:
            logger.warning("collateral of hotkey=%s unread: %s", hotkey[:10], error)
            return Cover(hotkey, 0, 0, 0, now, error=str(error) or type(error).__name__)


__all__ = ["Cover", "CollateralReader"]
