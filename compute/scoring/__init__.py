"""Pure scoring math: machine score from identified GPUs, moving averages, weight normalisation."""

from __future__ import annotations

from compute.scoring.score import (
    ScoringConfig,
    ScoringError,
    decay_missed,
    decay_score,
    ema_update,
    machine_score,
    normalise,
    round_sample,
    update_score,
)

__all__ = [
    "ScoringConfig",
    "ScoringError",
    "decay_missed",
    "decay_score",
    "ema_update",
    "machine_score",
    "normalise",
    "round_sample",
    "update_score",
]
