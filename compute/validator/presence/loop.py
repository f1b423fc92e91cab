"""The presence loop: presence checks of every miner at moments drawn from the OS's randomness.

``PresenceLoop`` is a block loop polled every block: when the drawn moment has come it checks every
queryable miner that has a proven capacity (``check.check_presence``), logs the verdicts in the
store (``record_presence``) and draws the next moment (``schedule.next_delay``; the mean follows the
number of validators so all of them together stay within their share of the load budget). A miner
without a proven capacity is not checked: it has no credit to keep, and its missing verdict is
absence. The check shares the validator's timed lock with the round's windows.

It computes no credit (``compute.scoring.presence`` does, for the weights).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import replace

from compute.validator.context import ValidatorContext
from compute.validator.presence.check import check_presence
from compute.validator.presence.schedule import next_delay, presence_interval
from compute.validator.round.loop import BlockLoop, select_targets

log = logging.getLogger(__name__)


class PresenceLoop(BlockLoop):
    name = "presence"
    interval_blocks = 1

    def __init__(
        self,
        ctx: ValidatorContext,
        *,
        presence_s: float,
        presence_budget: float,
        interval_s: float = 0.0,
        step_timeout: float = 600.0,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        first_within_s: float = 3600.0,
    ) -> None:
        self.ctx = ctx  # its timed lock shared with the round's windows, its oversight's renters trusted
        self.presence_s, self.presence_budget = presence_s, presence_budget
        self.fixed_interval_s = interval_s  # > 0: this mean interval instead of the budget's
        self.step_timeout = step_timeout
        self.rng, self.clock = rng or random.SystemRandom(), clock
        self.next_at: float | None = None
        self.checks_done = 0
        self.first_within_s = first_within_s  # a validator with no check logged yet runs one this soon

    def mean_interval(self, validators: int) -> float:
        if self.fixed_interval_s > 0:
            return self.fixed_interval_s
        return presence_interval(validators, self.presence_s, self.presence_budget)

    async def run_step(self, block: int) -> None:
        metagraph = await asyncio.wait_for(asyncio.to_thread(self.ctx.chain.metagraph), 60)
        mean = self.mean_interval(sum(1 for n in metagraph.neurons if n.validator_permit))
        now = self.clock()
        if not math.isfinite(mean):  # no presence budget: no checks (the rounds may be checks)
            self.next_at = None
            return
        if self.next_at is None:  # the first check too comes at a random moment (sooner on a new store)
            first = next_delay(mean, self.rng)
            self.next_at = now + (
                min(first, self.rng.uniform(0, self.first_within_s))
                if not self.ctx.store.presence_count()
                else first
            )
        if not math.isfinite(self.next_at) or now < self.next_at:
            return
        self.next_at = now + next_delay(mean, self.rng)
        await self.check_now(metagraph)

    async def check_now(self, metagraph=None) -> int | None:  # noqa: ANN001 - a MetagraphSnapshot
        """Run one presence check of every queryable miner now; returns its id in the log (None when
        no miner has a proven capacity yet)."""
        ctx = self.ctx
        if metagraph is None:
            metagraph = await asyncio.wait_for(asyncio.to_thread(ctx.chain.metagraph), 60)
        targets = select_targets(metagraph, ctx.hotkey, ctx.allow_same_ip)
        previous = {
            t.uid: found
            for t in targets
            if (found := ctx.store.last_verified(t.uid, t.hotkey)) is not None and not found.rented
        }
        params = replace(  # the renters the round trusts (receipts of rented GPUs)
            ctx.params,
            trusted_renters=ctx.oversight.trusted(metagraph),
            renter_coldkeys=ctx.oversight.coldkeys(metagraph),
            own_canaries=ctx.oversight.own_canaries(time.time()),
        )
        if not previous:  # no miner with a proven capacity: nothing to check (and nothing logged)
            return None
        entries = await check_presence(
            ctx, targets, previous, params, label=f"presence check {self.checks_done + 1}"
        )
        self.checks_done += 1
        return ctx.store.record_presence("presence", entries)


__all__ = ["PresenceLoop"]
