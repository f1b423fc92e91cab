"""The validator's periodic work as named loop objects driven by chain blocks, plus a watchdog.

``BlockLoop`` subclasses (``RoundLoop``, ``WeightsLoop``) declare ``name``, ``interval_blocks``,
``step_timeout`` and ``run_step(block)``. ``LoopRunner`` polls the block height (in a thread,
under a timeout), runs each loop when due, one step at a time (so rounds never overlap), catches
and logs every error per iteration, and a watchdog logs any loop whose step has not finished in
time. ``RoundLoop`` tests every queryable miner with bounded concurrency, persists each result as
it arrives, then closes the round in one store transaction (EMA for tested miners, decay for the
rest); a restart resumes an open round. Which miners a round tests, and when, follows
``compute.validator.round.schedule`` (random start offsets, a GPU-time budget shared by all validators).
This module holds no scoring math and no PoG protocol.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace

from compute.chain import Chain, MetagraphSnapshot, NeuronInfo
from compute.pog import shared_pool
from compute.scoring import Explanation, ScoringConfig, decay_score, presence_shares, update_score
from compute.store import PogResult, ScoreRecord, ScoreUpdate, ValidatorStore
from compute.validator.check.context import MinerCheck
from compute.validator.check.miner import check_miner
from compute.validator.context import ValidatorContext
from compute.validator.lockstep.window import Seat, Window
from compute.validator.params import MinerTarget
from compute.validator.rentals.truth import MinerNotes
from compute.validator.report.explained import explain_round
from compute.validator.report.progress import RoundProgress
from compute.validator.report.table import print_round_table, round_table
from compute.validator.report.verdicts import TELL_TIMEOUT_S, tell_miners
from compute.validator.report.wandb_log import WandbLogger
from compute.validator.round.schedule import RoundSchedule, check_probability, due_uids, start_offsets
from compute.validator.round.weights import WeightsError, WeightSetter, weights_from_scores
from compute.validator.round.windows import pack_windows, result_presence

log = logging.getLogger(__name__)


def settle_heap() -> None:
    """Move every object alive now (imports, wiring: ~140k) out of the collector's reach (``gc.freeze``).

    A full collection walks every tracked object: ~0.17 s for the validator's imports alone, a pause
    of the event loop -- and of every timestamp it takes -- each time one runs (the fleet benchmark
    saw gc pauses up to ~1 s under load). Frozen objects are never collected, so this runs once,
    after start-up, before the clock matters; what rounds allocate later is collected as usual."""
    gc.collect()
    gc.freeze()


class BlockLoop(ABC):
    """Periodic work run every ``interval_blocks`` blocks."""

    name: str = "loop"
    interval_blocks: int = 1
    step_timeout: float = 600.0

    @abstractmethod
    async def run_step(self, block: int) -> None: ...


class LoopRunner:
    """Runs block loops until ``stop`` is set; one task per loop plus a watchdog."""

    def __init__(
        self,
        block: Callable[[], Awaitable[int]],
        loops: Iterable[BlockLoop],
        poll_s: float = 2.0,
        watchdog_s: float = 30.0,
    ) -> None:
        self._block = block
        self.loops = list(loops)
        self.poll_s = poll_s
        self.watchdog_s = watchdog_s
        self.stop = asyncio.Event()
        self._busy_since: dict[str, float | None] = {loop.name: None for loop in self.loops}

    async def run(self) -> None:
        settle_heap()
        tasks = [asyncio.create_task(self._drive(loop), name=loop.name) for loop in self.loops]
        tasks.append(asyncio.create_task(self._watchdog(), name="watchdog"))
        try:
            await self.stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _drive(self, loop: BlockLoop) -> None:
        next_block: int | None = None
        while not self.stop.is_set():
            try:
                block = await self._block()
                if next_block is None or block >= next_block:
                    next_block = block + loop.interval_blocks
                    self._busy_since[loop.name] = time.monotonic()
                    await asyncio.wait_for(loop.run_step(block), loop.step_timeout)
            except asyncio.CancelledError:
                raise
            except asyncio.TimeoutError:
                log.error("loop=%s step exceeded %.0fs and was cancelled", loop.name, loop.step_timeout)
            except Exception:  # the loop boundary: log and go on with the next iteration
                log.exception("loop=%s step failed", loop.name)
            finally:
                self._busy_since[loop.name] = None
            await self._sleep(self.poll_s)

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _watchdog(self) -> None:
        while not self.stop.is_set():
            await self._sleep(self.watchdog_s)
            now = time.monotonic()
            for loop in self.loops:
                since = self._busy_since.get(loop.name)
                if since is not None and now - since > min(loop.step_timeout, self.watchdog_s * 10):
                    log.warning("watchdog: loop=%s busy for %.0fs", loop.name, now - since)


def chain_block_source(chain: Chain, timeout: float = 30.0) -> Callable[[], Awaitable[int]]:
    async def block() -> int:
        return await asyncio.wait_for(asyncio.to_thread(chain.block), timeout)

    return block


def select_targets(metagraph: MetagraphSnapshot, own_hotkey: str, allow_same_ip: bool) -> list[MinerTarget]:
    """Queryable miners: axon set, not this validator, one uid per IP unless allowed (lowest uid wins)."""
    targets: list[MinerTarget] = []
    seen_ips: set[str] = set()
    for neuron in sorted(metagraph.neurons, key=lambda n: n.uid):
        if neuron.hotkey == own_hotkey or not neuron.axon:
            continue
        ip = neuron.axon.rsplit(":", 1)[0]
        if not allow_same_ip and ip in seen_ips:
            log.info("uid=%d skipped: another uid already tested at ip=%s", neuron.uid, ip)
            continue
        seen_ips.add(ip)
        targets.append(MinerTarget(neuron.uid, neuron.hotkey, neuron.axon))
    return targets


def stored_shares(store: ValidatorStore, window: int) -> dict[str, float] | None:
    """Each hotkey's presence share over the store's last ``window`` checks (None: no check yet)."""
    return presence_shares([check.fractions() for check in store.presence_checks(window)], window)


def score_updates(
    results: Iterable[PogResult],
    scores: Mapping[int, ScoreRecord],
    miners: Iterable[NeuronInfo],
    config: ScoringConfig,
    own_hotkey: str | None = None,
) -> list[ScoreUpdate]:
    """EMA for every tested miner, decay for every registered miner not tested this round.

    A result with ``history_reset`` (its GPU UUID set changed) starts a fresh average."""
    updates: dict[int, ScoreUpdate] = {}
    for result in results:
        prev = scores.get(result.uid)
        prev_score = prev.score if prev is not None and prev.hotkey == result.hotkey else None
        if result.history_reset:  # a changed GPU set: the machine's history starts again
            prev_score = None
        updates[result.uid] = ScoreUpdate(
            result.uid, result.hotkey, update_score(prev_score, result.sample, config)
        )
    for neuron in miners:
        if neuron.uid in updates or neuron.hotkey == own_hotkey:
            continue
        prev = scores.get(neuron.uid)
        if prev is not None and prev.hotkey == neuron.hotkey:
            updates[neuron.uid] = ScoreUpdate(neuron.uid, neuron.hotkey, decay_score(prev.score, config))
    return sorted(updates.values(), key=lambda u: u.uid)


class RoundLoop(BlockLoop):
    name = "pog_round"

    def __init__(
        self,
        ctx: ValidatorContext,
        *,
        interval_blocks: int,
        concurrency: int,
        step_timeout: float,
        schedule: RoundSchedule | None = None,
        wandb: WandbLogger | None = None,
        show_table: bool = True,
        rounds_limit: int = 0,
        on_limit: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.ctx = ctx  # chain, store, client, hotkey, params, table, scoring, oversight, timed lock
        self.interval_blocks, self.step_timeout, self.concurrency = interval_blocks, step_timeout, concurrency
        # schedule (compute.validator.round.schedule): random start offsets, GPU-time budget per miner
        self.schedule = schedule if schedule is not None else RoundSchedule()
        self.wandb, self.show_table = wandb, show_table
        self.rounds_limit, self.on_limit = rounds_limit, on_limit
        self.rounds_done = 0
        self.progress_every_s = 10.0  # one progress line this often off a terminal

    def _chance(self, metagraph: MetagraphSnapshot) -> float:
        """The load budget's chance to test a miner this round (a test's GPU time plus its share of
        canaries count against the budget)."""
        validators = sum(1 for n in metagraph.neurons if n.validator_permit)
        schedule = self.schedule
        cost = schedule.check_seconds + self.ctx.oversight.canary_seconds()
        return check_probability(validators, schedule.interval_s, cost, schedule.load_budget)

    def _schedule(
        self,
        targets: list[MinerTarget],
        metagraph: MetagraphSnapshot,
        together: frozenset[int] = frozenset(),
        chance: float | None = None,
    ) -> tuple[list[MinerTarget], set[int], float]:
        """(targets due this round, uids not drawn this round, seconds into the round to start).

        A miner this validator has no positive score for is always due (new or failing miners
        are tested at once); the others are drawn with the load budget's probability. Suspected
        duplicates (``together``) are always due. The round's lockstep windows start at one random
        moment of the spread (drawn from the OS's randomness: a miner cannot predict it)."""
        chance = self._chance(metagraph) if chance is None else chance
        scores = self.ctx.store.scores()
        unscored = {
            t.uid
            for t in targets
            if (rec := scores.get(t.uid)) is None or rec.hotkey != t.hotkey or rec.score <= 0
        }
        rng = self.schedule.rng
        due = (
            due_uids((t.uid for t in targets), chance, rng) | unscored | (together & {t.uid for t in targets})
        )
        start_s = start_offsets([0], self.schedule.spread_s, rng)[0]
        kept = [t for t in targets if t.uid in due]
        skipped = {t.uid for t in targets} - due
        if skipped:
            log.info("schedule: p=%.3f, %d miners not drawn this round", chance, len(skipped))
        return kept, skipped, start_s

    async def run_step(self, block: int) -> None:
        ctx = self.ctx
        store, client, oversight = ctx.store, ctx.client, ctx.oversight
        await shared_pool(ctx.params.verify_workers).start()  # spawn and compile before any clock runs
        metagraph = await asyncio.wait_for(asyncio.to_thread(ctx.chain.metagraph), 60)
        store.sync_miners((n.uid, n.hotkey) for n in metagraph.neurons if n.hotkey != ctx.hotkey)
        record = store.begin_round(block)
        params = replace(ctx.params, round_id=record.round_id, block=record.block)
        done = store.tested_uids(record.round_id)
        candidates = [
            t for t in select_targets(metagraph, ctx.hotkey, ctx.allow_same_ip) if t.uid not in done
        ]
        chance = self._chance(metagraph)
        plan = oversight.plan((t.uid for t in candidates), chance)
        targets, skipped, start_s = self._schedule(candidates, metagraph, plan.together, chance)
        log.info(
            "round=%d block=%d testing %d miners (%d already done)",
            record.round_id,
            block,
            len(targets),
            len(done),
        )
        deadline = time.monotonic() + self.step_timeout * 0.9
        params = replace(
            params,
            trusted_renters=oversight.trusted(metagraph),
            renter_coldkeys=oversight.coldkeys(metagraph),
            own_canaries=oversight.own_canaries(time.time()),
        )
        notes = {t.uid: MinerNotes() for t in targets}
        untested: set[int] = set()  # tests the validator itself failed (never the miner's zero)
        windows = pack_windows(targets, plan.groups, self.concurrency)
        # canaries at their own moments of the round's interval; a miner's test and its canary take
        # turns (the desk's lock per miner)
        desk = oversight.canaries(client)
        canary_targets = [t for t in candidates if t.uid in plan.canary]
        canaries = desk.start(canary_targets, notes, self.schedule.interval_s, metagraph)

        async def one(target: MinerTarget, seat: Seat) -> None:
            async with desk.lock(target.uid):
                check = MinerCheck(
                    client,
                    target,
                    params,
                    ctx.table,
                    ctx.scoring,
                    store.last_verified(target.uid, target.hotkey),
                    notes[target.uid],
                    basis=store.last_whole_verification(target.uid, target.hotkey),
                    seat=seat,
                )
                result = await check_miner(check, deadline)
            if result is None:  # the validator's own error: not tested, neither scored nor decayed
                untested.add(target.uid)
                progress.advance(False)
                return
            store.record_result(oversight.after_check(result, notes[target.uid]))
            progress.advance(result.ok)

        progress = RoundProgress(record.round_id, len(targets), every_s=self.progress_every_s)
        beat = asyncio.create_task(progress.heartbeat())
        try:
            # the round's windows run one after the other, from one random moment in the spread
            latest = deadline - time.monotonic() - len(windows) * params.miner_timeout
            await asyncio.sleep(max(0.0, min(start_s, latest)))
            for index, batch in enumerate(windows):
                label = f"round {record.round_id} window {index + 1}/{len(windows)}"
                async with Window(
                    label, prepare_s=params.lockstep.prepare_s, timed_lock=ctx.timed_lock
                ) as window:
                    seats = {t.uid: window.seat(f"uid {t.uid}") for t in batch}
                    window.start()
                    await asyncio.gather(*(one(t, seats[t.uid]) for t in batch))
            if canaries and self.schedule.interval_s <= 0:  # canaries begun with the round: waited
                # for, one canary's bound at most. Canaries drawn at random moments of the whole
                # interval are not: the desk holds them and their outcome counts when it comes (a
                # round that waited for them lasted to its deadline: a demo round past 589 s)
                left = min(deadline - time.monotonic(), desk.timing.bound_s)
                await asyncio.wait(canaries.values(), timeout=max(0.0, left))
        finally:
            beat.cancel()
            progress.close()
        recorded = store.results(record.round_id)
        results = oversight.close(recorded, notes, {t.uid: t.endpoint for t in targets})
        for before, after in zip(recorded, results, strict=True):
            if after != before:
                store.revise_result(after)
        if len(windows) == 1 and not done and not skipped and not untested and targets:
            store.record_presence("round", [result_presence(r) for r in results])  # all at one moment
        not_skipped = [n for n in metagraph.neurons if n.uid not in skipped | untested]  # not missed
        prior = store.scores()
        updates = score_updates(results, prior, not_skipped, ctx.scoring, ctx.hotkey)
        store.finish_round(record.round_id, updates)
        explained = self._report(record.round_id, results, metagraph, await self._factors(metagraph), prior)
        scores = {uid: rec.score for uid, rec in store.scores().items()}
        try:  # every tested miner reads why it scored what it did (best effort, bounded)
            await asyncio.wait_for(
                tell_miners(client, results, {t.uid: t for t in targets}, scores, explained),
                TELL_TIMEOUT_S + 5,
            )
        except asyncio.TimeoutError:
            log.info("round=%d verdicts: not every miner was told in time", record.round_id)
        self.rounds_done += 1
        if self.rounds_limit and self.rounds_done >= self.rounds_limit and self.on_limit is not None:
            await self.on_limit()

    async def _factors(self, metagraph: MetagraphSnapshot) -> Mapping[int, float] | None:
        """The weights' credit factors for the round's table (None when there are none or they fail:
        the report only shows them; the weights loop reads its own)."""
        if self.ctx.credit_factors is None:
            return None
        try:
            return await self.ctx.credit_factors(metagraph)
        except Exception:  # noqa: BLE001 - a report boundary: the round stands
            log.exception("credit factors unavailable for the round's table")
            return None

    def _report(
        self,
        round_id: int,
        results: list[PogResult],
        metagraph: MetagraphSnapshot,
        factors: Mapping[int, float] | None = None,
        before: Mapping[int, ScoreRecord] | None = None,
    ) -> dict[int, Explanation]:
        """Table and wandb: what people read; returns each result's explanation (for the verdicts).
        The round is already closed; nothing here may undo it or keep ``rounds_done`` from counting
        it (a report that raises is logged, never fatal)."""
        ctx = self.ctx
        explained: dict[int, Explanation] = {}
        try:
            scores = ctx.store.scores()
            shares = stored_shares(ctx.store, ctx.presence_window)
            weights = weights_from_scores(scores, metagraph, ctx.hotkey, ctx.credit_step, factors, shares)
            plain = {uid: rec.score for uid, rec in scores.items()}
            explained = explain_round(
                results,
                before or {},
                scores,
                table=ctx.table,
                holistic=ctx.params.holistic,
                scoring=ctx.scoring,
                shares=shares,
                factors=factors,
            )
            if self.show_table:
                print_round_table(round_table(round_id, results, plain, weights), explanations=explained)
            if self.wandb is not None:
                self.wandb.log_round(round_id, results, plain, weights)
        except Exception:  # noqa: BLE001 - a report boundary: the round stands
            log.exception("round=%d report failed (the round is recorded)", round_id)
        return explained


class WeightsLoop(BlockLoop):
    name = "set_weights"

    def __init__(
        self,
        ctx: ValidatorContext,
        setter: WeightSetter,
        *,
        interval_blocks: int,
        step_timeout: float = 600.0,
    ) -> None:
        self.ctx, self.setter = ctx, setter  # credit step, factors and presence window: the context's
        self.interval_blocks, self.step_timeout = interval_blocks, step_timeout
        self._idle_logged = False

    async def run_step(self, block: int) -> None:
        ctx = self.ctx
        if ctx.store.rounds_finished() == 0:
            # said once at INFO, then at DEBUG on every later idle poll
            log.log(
                logging.DEBUG if self._idle_logged else logging.INFO, "no finished round yet; weights not set"
            )
            self._idle_logged = True
            return
        shares = stored_shares(ctx.store, ctx.presence_window)
        if shares is None:
            log.log(
                logging.DEBUG if self._idle_logged else logging.INFO, "no presence check yet; weights not set"
            )
            self._idle_logged = True
            return
        metagraph = await asyncio.wait_for(asyncio.to_thread(ctx.chain.metagraph), 60)
        factors = await ctx.credit_factors(metagraph) if ctx.credit_factors is not None else None
        weights = weights_from_scores(
            ctx.store.scores(), metagraph, ctx.hotkey, ctx.credit_step, factors, shares
        )
        try:
            await self.setter.set(weights, block)
        except WeightsError as exc:
            log.error("weights not set: %s", exc)
