"""When a validator tests which miner within a round: random offsets and a GPU-time budget.

Many validators test the same miners. Two rules keep that cheap for miners and fair to measure:

- **Spread** (``start_offsets``): each validator starts each miner's test at its own random offset
  inside ``spread_s`` seconds of the round, drawn from the OS's randomness, so validators do not
  all arrive at once (no contention that would make them measure different figures) and a miner
  cannot predict when a proof comes.
- **Budget** (``check_probability``): a validator tests a miner in a round with probability
  ``p = min(1, budget x interval / (validators x check_s))``, so all validators together hold a
  miner's GPUs at most ``budget`` of the time in expectation, whatever their number. A miner not
  drawn keeps its score unchanged (it was not due; it did not miss). Expected tests per miner per
  round stay ``validators x p`` >= 1 while ``budget x interval >= check_s``.

``RoundSchedule`` holds one validator's figures for both rules (and its ``random.Random``).

Pure: takes a ``random.Random`` (tests pass a seeded one); no clock, no I/O.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

DEFAULT_SPREAD_SHARE = 0.5  # of the round interval, when no spread is configured
DEFAULT_LOAD_BUDGET = 0.05  # share of a miner's GPU time all validators together may take


def fresh_rng() -> random.Random:
    return random.Random(secrets.randbits(64))


@dataclass(frozen=True)
class RoundSchedule:
    """A round loop's schedule: its start moments drawn within ``spread_s``, and the chance to test
    a miner from the ``load_budget``, a test's GPU seconds (``check_seconds``) and the round interval
    (``interval_s``). The defaults test every miner, at once."""

    spread_s: float = 0.0
    load_budget: float = 0.0  # 0: no budget (every miner due every round)
    check_seconds: float = 30.0
    interval_s: float = 0.0
    rng: random.Random = field(default_factory=fresh_rng)  # the draws (tests pass a seeded one)


def round_spread(
    configured: float | None, interval_s: float, step_timeout: float, miner_timeout: float
) -> float:
    """Seconds to spread a round's tests over: configured (or half the interval), and always
    leaving one miner timeout before the round step's own timeout."""
    wanted = DEFAULT_SPREAD_SHARE * interval_s if configured is None else configured
    return max(0.0, min(wanted, 0.9 * step_timeout - miner_timeout))


def start_offsets(uids: Iterable[int], spread_s: float, rng: random.Random) -> dict[int, float]:
    """Start offset (seconds into the round) per miner uid, uniform in ``[0, spread_s)``."""
    return {uid: (rng.uniform(0.0, spread_s) if spread_s > 0 else 0.0) for uid in uids}


def check_probability(validators: int, interval_s: float, check_s: float, budget: float) -> float:
    """Chance that this validator tests a given miner this round (1 when the budget allows all)."""
    if budget <= 0 or validators <= 0 or check_s <= 0:
        return 1.0
    return min(1.0, budget * interval_s / (validators * check_s))


def due_uids(uids: Iterable[int], probability: float, rng: random.Random) -> set[int]:
    """The uids this validator tests this round; each drawn independently with ``probability``."""
    return {uid for uid in uids if probability >= 1.0 or rng.random() < probability}


def validation_load(validators: int, interval_s: float, check_s: float, probability: float = 1.0) -> float:
    """Expected share of one miner's GPU time spent on validation proofs."""
    if interval_s <= 0:
        return 1.0
    return min(1.0, validators * probability * check_s / interval_s)
