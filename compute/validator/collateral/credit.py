"""The collateral factor of every miner's credit, read from the contract when weights are set.

For each registered miner with a score, the deposit is its hotkey's (one per hotkey: there is no
machine identity of the miner's choosing to read it under) and the required amount is one day of
rent of the GPUs this validator last proved (at least one unit): a miner showing each validator
another GPU set still has one deposit, measured against what each proved. The factor is
``collateral_factor(standing, required, floor)``: 1 at the required amount, a linear ramp down to
``floor`` with no deposit.
It multiplies the score at the weights, not the samples: a deposit counts while it is there (a
reclaim asked lowers it at once) and never compounds into the moving average.

Only the contract's numbers count. A deposit the validator could not read is the last value it
read within ``stale_s``, else no deposit (the floor): ambiguity resolves to the lower credit.
What it read is published beside the store (``publish``: ``compute.collateral.standing``), which
the public machine feed shows renters. What it deliberately does not do: write to the chain
(``desk``) or touch the scores.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from compute.chain import MetagraphSnapshot
from compute.collateral import CollateralError, collateral_factor
from compute.collateral.standing import PublishedStanding, write_standing
from compute.store import PogResult, ScoreRecord

log = logging.getLogger(__name__)
READ_CONCURRENCY = 8


class DepositReader(Protocol):
    """What the credit needs of ``compute.collateral.CollateralClient`` (sync: run in a thread)."""

    def deposit_of(self, hotkey: str) -> Any: ...
    def required(self, gpus: int) -> int: ...


class VerifiedSource(Protocol):
    def last_verified(self, uid: int, hotkey: str) -> PogResult | None: ...
    def scores(self) -> Mapping[int, ScoreRecord]: ...


def proven_units(result: PogResult | None) -> int:
    """GPUs a deposit must cover: the proven count (credited after scaling), at least one unit."""
    if result is None:
        return 1
    count = result.credited_gpus if result.credited_gpus is not None else result.gpu_count
    return max(1, int(count))


@dataclass(frozen=True)
class Standing:
    """One miner's collateral as last read: the factor and why."""

    factor: float
    standing_wei: int
    required_wei: int
    read_at: float
    deposit_wei: int = 0
    pending_reclaim_wei: int = 0
    reclaim_at: int = 0


@dataclass
class CollateralCredit:
    reader: DepositReader
    store: VerifiedSource
    floor: float = 0.5
    timeout_s: float = 20.0
    stale_s: float = 3600.0
    clock: Any = time.time
    publish: Path | None = None  # where what was read is published for the feed (None: nowhere)
    _known: dict[str, Standing] = field(default_factory=dict)
    _rate: int | None = None
    last: dict[int, float] = field(default_factory=dict)

    async def __call__(self, metagraph: MetagraphSnapshot) -> Mapping[int, float]:
        """uid -> factor in [floor, 1] for every miner with a positive score (the weights' factors;
        a uid left out has no score, hence no weight, whatever its factor)."""
        scores = self.store.scores()
        miners = [
            n
            for n in metagraph.neurons
            if (rec := scores.get(n.uid)) is not None and rec.hotkey == n.hotkey and rec.score > 0
        ]
        gate = asyncio.Semaphore(READ_CONCURRENCY)

        async def one(uid: int, hotkey: str) -> tuple[int, Standing]:
            result = self.store.last_verified(uid, hotkey)
            async with gate:
                return uid, await self._standing(hotkey, proven_units(result))

        read = await asyncio.gather(*(one(n.uid, n.hotkey) for n in miners))
        factors = {uid: standing.factor for uid, standing in read}
        if self.publish is not None:
            hotkeys = {n.uid: n.hotkey for n in miners}
            self._publish({hotkeys[uid]: standing for uid, standing in read if standing.read_at > 0})
        for uid, standing in read:
            if self.last.get(uid) != standing.factor:
                log.info(
                    "collateral uid=%d factor=%.3f standing=%d required=%d wei",
                    uid,
                    standing.factor,
                    standing.standing_wei,
                    standing.required_wei,
                )
        self.last = factors
        return factors

    async def _standing(self, hotkey: str, units: int) -> Standing:
        key = hotkey
        try:
            rate = await self._rate_per_unit()
            deposit = await asyncio.wait_for(
                asyncio.to_thread(self.reader.deposit_of, hotkey), self.timeout_s
            )
        except (CollateralError, asyncio.TimeoutError, OSError) as error:
            known = self._known.get(key)
            if known is not None and self.clock() - known.read_at <= self.stale_s:
                return known
            log.warning("collateral hotkey=%s unread (%s): no deposit counted", hotkey[:10], error)
            return Standing(self.floor, 0, 0, 0.0)  # never read: nothing to publish
        required = rate * units
        standing = max(0, int(deposit.standing))
        factor = collateral_factor(standing, required, self.floor)
        read = Standing(
            factor,
            standing,
            required,
            self.clock(),
            deposit.amount,
            deposit.pending_reclaim,
            deposit.reclaim_at,
        )
        self._known[key] = read
        return read

    def _publish(self, read: Mapping[str, Standing]) -> None:
        assert self.publish is not None
        published = {
            hotkey: PublishedStanding(
                deposit_wei=s.deposit_wei,
                pending_reclaim_wei=s.pending_reclaim_wei,
                reclaim_at=s.reclaim_at,
                read_at=s.read_at,
            )
            for hotkey, s in read.items()
        }
        try:
            write_standing(self.publish, published)
        except OSError as error:
            log.warning("collateral standing not published at %s: %s", self.publish, error)

    async def _rate_per_unit(self) -> int:
        if self._rate is None:
            self._rate = int(
                await asyncio.wait_for(asyncio.to_thread(self.reader.required, 1), self.timeout_s)
            )
        return self._rate


__all__ = ["CollateralCredit", "DepositReader", "Standing", "proven_units"]
