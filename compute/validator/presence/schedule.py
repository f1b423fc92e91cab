"""When presence checks come, and what they and the throughput proofs cost miners.

The load budget (``--validator.load_budget``, 5 % of a miner's GPU time for all validators
together) is split: ``presence_share`` of it for presence checks, the rest for throughput proofs
(``compute.validator.round.schedule.check_probability``). Each validator runs its presence checks
at the moments of a Poisson clock whose mean interval keeps all validators' checks inside their
share: ``mean = validators x presence_s / (budget x presence_share)``. Every delay is drawn from the
OS's randomness (``secrets``), so no miner can predict the next check from the last ones.

Pure except for the random source passed in.
"""

from __future__ import annotations

import math
import random

DEFAULT_PRESENCE_SHARE = 0.4  # of the load budget: presence checks (the rest: throughput proofs)
MIN_INTERVAL_S = 60.0  # never more often than this, whatever the budget says


def split_budget(budget: float, presence_share: float) -> tuple[float, float]:
    """(throughput budget, presence budget) of the load budget."""
    share = min(1.0, max(0.0, presence_share))
    return budget * (1.0 - share), budget * share


def presence_interval(validators: int, presence_s: float, presence_budget: float) -> float:
    """Mean seconds between one validator's presence checks (``inf`` when the budget is 0)."""
    if presence_budget <= 0 or presence_s <= 0:
        return math.inf
    return max(MIN_INTERVAL_S, max(1, validators) * presence_s / presence_budget)


def next_delay(mean_s: float, rng: random.Random) -> float:
    """Seconds to the next check: exponential with ``mean_s`` (memoryless: the time since the last
    check says nothing about the next)."""
    if not math.isfinite(mean_s):
        return math.inf
    return rng.expovariate(1.0 / mean_s)


def presence_load(validators: int, presence_s: float, mean_s: float) -> float:
    """Expected share of a miner's GPU time all validators' presence checks take."""
    if not math.isfinite(mean_s) or mean_s <= 0:
        return 0.0
    return min(1.0, validators * presence_s / mean_s)


__all__ = [
    "DEFAULT_PRESENCE_SHARE",
    "MIN_INTERVAL_S",
    "next_delay",
    "presence_interval",
    "presence_load",
    "split_budget",
]
