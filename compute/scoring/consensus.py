"""The consensus step: map noise-level differences between miners' credits together.

Applied after the value function, before weights are normalised (``weights_from_scores``). Each
credit is floored onto a geometric grid ``(1 + step)^k`` (k an integer, the grid anchored at 1):

    consensus_credit(x, step) = (1 + step)^floor(log(x) / log(1 + step))     (x > 0), else 0

Why: validators measure the same machine from different places at different times; latency,
clock jitter and thermal variation move a credit by a few per cent. Two validators whose credits
for a miner differ by less than one step usually land on the same level and then agree exactly,
which Yuma consensus rewards (no clipping, full validator trust).

Why it is sound: the map is monotone (never reorders two miners) and never raises a credit
(``consensus_credit(x) <= x``): a cheater can never earn more than its proven credit, and whatever
the miner controls still only lowers it. The cost is at most one step of an honest miner's
credit, paid equally by every miner on the same level. ``step = 0`` turns the step off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from compute.scoring.score import ScoringError

DEFAULT_CREDIT_STEP = 0.0  # off unless configured (--validator.credit_step); see docs/consensus.md


def consensus_credit(credit: float, step: float) -> float:
    """``credit`` floored onto the grid ``(1 + step)^k``; non-positive or non-finite -> 0."""
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not 0.0 <= step <= 1.0:
        raise ScoringError(f"credit step must be in [0, 1], got {step!r}")
    if isinstance(credit, bool) or not isinstance(credit, (int, float)):
        return 0.0
    if not math.isfinite(credit) or credit <= 0.0:
        return 0.0
    if step == 0.0:
        return float(credit)
    base = math.log1p(step)
    level = math.floor(math.log(credit) / base + 1e-9)  # exact grid points stay on their level
    return min(float(credit), math.exp(level * base))


def consensus_credits(credits: Mapping[int, float], step: float) -> dict[int, float]:
    """``consensus_credit`` per uid."""
    return {uid: consensus_credit(value, step) for uid, value in credits.items()}
