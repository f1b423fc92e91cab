"""Scoring math: moving averages of round samples, and weight normalisation.

What it does: pure functions over numbers (the round's sample itself is ``holistic.holistic_score``
of credits from ``value.gpu_credit``; a machine is never scored from model names):
- ``ema_update`` / ``decay_missed`` / ``update_score``: per-miner moving average, where a failed or
  cheating round is a sample of 0 (one failure dents the average, sustained failures drive it to 0);
- ``normalise``: L1-normalised weights per uid for ``set_weights``.

What it deliberately does not do: no I/O, no chain, no clock, no identification.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)


class ScoringError(ValueError):
    """Invalid scoring input (negative GPU count, alpha outside (0, 1], ...)."""


class ScoringConfig(BaseModel):
    """Scoring policy knobs (validator settings map onto these)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_gpus_counted: int = Field(default=8, ge=1, le=4096)
    # on a verified rented GPU proven present; 0: no receipt shows the rental cost its renter
    # something the miner cannot recycle to itself, so a bonus would pay self-rentals
    rented_bonus: float = Field(default=0.0, ge=0.0, le=10.0)
    ema_alpha: float = Field(default=0.3, gt=0.0, le=1.0)  # weight of the newest round
    missed_decay: float = Field(default=0.9, ge=0.0, le=1.0)  # factor per round the miner was not tested
    min_score: float = Field(default=1e-6, ge=0.0)  # averages below this snap to 0


def _clean(value: float | None) -> float:
    """Non-finite, negative or missing numbers count as 0."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0


def round_sample(score: float, passed: bool) -> float:
    """The sample a round contributes: the machine score when the proof passed, else 0."""
    return _clean(score) if passed else 0.0


def ema_update(prev: float | None, sample: float, alpha: float, floor: float = 0.0) -> float:
    """``alpha x sample + (1 - alpha) x prev``; the first sample (prev None) is taken as is.

    A non-finite or negative sample counts as 0; a result below ``floor`` snaps to 0.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha <= 1.0:
        raise ScoringError(f"ema alpha must be in (0, 1], got {alpha!r}")
    value = _clean(sample)
    if prev is not None:
        value = alpha * value + (1.0 - alpha) * _clean(prev)
    return value if value >= floor else 0.0


def decay_missed(prev: float | None, factor: float, floor: float = 0.0) -> float:
    """Score after a round in which the miner could not be tested: ``prev x factor`` (0 if none)."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0.0 <= factor <= 1.0:
        raise ScoringError(f"decay factor must be in [0, 1], got {factor!r}")
    value = _clean(prev) * factor
    return value if value >= floor else 0.0


def update_score(prev: float | None, sample: float, config: ScoringConfig | None = None) -> float:
    """``ema_update`` with the config's alpha and ``min_score`` floor."""
    config = config or ScoringConfig()
    return ema_update(prev, sample, config.ema_alpha, config.min_score)


def decay_score(prev: float | None, config: ScoringConfig | None = None) -> float:
    """``decay_missed`` with the config's factor and ``min_score`` floor."""
    config = config or ScoringConfig()
    return decay_missed(prev, config.missed_decay, config.min_score)


def normalise(scores: Mapping[int, float]) -> dict[int, float]:
    """L1-normalise scores per uid; negatives / NaN / inf count as 0; all zero -> all zeros."""
    cleaned = {uid: _clean(score) for uid, score in scores.items()}
    largest = max(cleaned.values(), default=0.0)
    if largest <= 0.0:
        return {uid: 0.0 for uid in cleaned}
    scaled = {uid: value / largest for uid, value in cleaned.items()}  # no overflow near float max
    total = math.fsum(scaled.values())
    return {uid: value / total for uid, value in scaled.items()}
