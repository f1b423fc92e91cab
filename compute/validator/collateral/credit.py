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
A misbehaving endpoint never holds the weights: each call is bounded by the transport
(``compute.collateral.rpc``: a whole-call deadline, a size cap), the first read that fails makes
every other miner of the same reading fall back at once instead of waiting its own turn, all
reads of one weight setting end within ``budget_s`` (those still unread fall back), and they run
on this reader's own threads, never the event loop's default executor.
What it read is published beside the store (``publish``: ``compute.collateral.standing``), which
the public machine feed shows renters. What it deliberately does not do: write to the chain
(``desk``) or touch the scores.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from compute.chain import MetagraphSnapshot
from compute.collateral import ChainUnavailable, CollateralError, collateral_factor
from compute.collateral.standing import PublishedStanding, write_standing
from compute.peertext import printable
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


@dataclass(frozen=True)
class Reading:
    """One reading of every miner's deposit: how many were read, how many fell back, and why."""

    read: int
    fell_back: int
    took_s: float
    why: str | None = None  # the first failure (it made the rest fall back at once)


@dataclass
class _ReadingState:
    failure: str | None = None  # the first: the endpoint is not read again in this reading

    def fail(self, why: str) -> None:
        self.failure = self.failure or why


@dataclass
class CollateralCredit:
    reader: DepositReader
    store: VerifiedSource
    floor: float = 0.5
    timeout_s: float = 20.0  # one read, whatever the reader's own bound (a second net)
    budget_s: float = 30.0  # every read of one weight setting: past it, the unread fall back
    stale_s: float = 3600.0
    clock: Any = time.time
    publish: Path | None = None  # where what was read is published for the feed (None: nowhere)
    _known: dict[str, Standing] = field(default_factory=dict)
    _rate: int | None = None
    _pool: ThreadPoolExecutor | None = None
    last: dict[int, float] = field(default_factory=dict)
    last_reading: Reading | None = None

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
        started = time.monotonic()
        state = _ReadingState()

        async def one(uid: int, hotkey: str) -> Standing | None:
            result = self.store.last_verified(uid, hotkey)
            async with gate:
                return await self._standing(hotkey, proven_units(result), state)

        tasks = [asyncio.ensure_future(one(n.uid, n.hotkey)) for n in miners]
        try:
            _, pending = await asyncio.wait(tasks, timeout=self.budget_s) if tasks else (set(), set())
        finally:  # the budget spent, or the caller cancelled: no read outlives the reading
            for task in tasks:
                task.cancel()
        if pending:
            state.fail(f"not every deposit read within {self.budget_s:g} s")
        fresh = {
            n.uid: standing
            for n, task in zip(miners, tasks, strict=True)
            if task.done() and not task.cancelled() and (standing := task.result()) is not None
        }
        read = [(n.uid, fresh.get(n.uid) or self._fallback(n.hotkey)) for n in miners]
        self.last_reading = Reading(
            len(fresh), len(read) - len(fresh), time.monotonic() - started, state.failure
        )
        if state.failure is not None:
            log.warning(
                "collateral: %d of %d deposits unread (%s): each counts its last read within %.0f s, "
                "else no deposit",
                len(read) - len(fresh),
                len(read),
                state.failure,
                self.stale_s,
            )
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

    def _fallback(self, hotkey: str) -> Standing:
        """A deposit not read now: the last read within ``stale_s``, else none (the floor)."""
        known = self._known.get(hotkey)
        if known is not None and self.clock() - known.read_at <= self.stale_s:
            return known
        return Standing(self.floor, 0, 0, 0.0)  # never read: nothing to publish

    async def _in_thread(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` on this reader's own threads, at most ``timeout_s``."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(READ_CONCURRENCY, thread_name_prefix="collateral-read")
        future = asyncio.get_running_loop().run_in_executor(self._pool, call, *args)
        return await asyncio.wait_for(future, self.timeout_s)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def _standing(self, hotkey: str, units: int, state: _ReadingState) -> Standing | None:
        """The deposit read now (None: not read, the caller falls back)."""
        if state.failure is not None:  # the endpoint failed this reading already: do not queue on it
            return None
        try:
            rate = await self._rate_per_unit()
            deposit = await self._in_thread(self.reader.deposit_of, hotkey)
        except (ChainUnavailable, asyncio.TimeoutError, OSError) as error:
            state.fail(printable(error, 300) or f"no answer within {self.timeout_s:g} s")
            return None
        except CollateralError as error:  # this hotkey's read only (a revert): the others go on
            log.warning("collateral hotkey=%s unread (%s)", hotkey[:10], printable(error, 300))
            return None
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
        self._known[hotkey] = read
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
            self._rate = int(await self._in_thread(self.reader.required, 1))
        return self._rate


__all__ = ["CollateralCredit", "DepositReader", "Reading", "Standing", "proven_units"]
