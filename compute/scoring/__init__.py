"""Pure scoring math: machine score from identified GPUs, the holistic score (GPU throughput and
memory x sustained factor x host factor x rental), moving averages, weight normalisation."""

from __future__ import annotations

from compute.scoring.holistic import (
    GpuEvidence,
    HolisticConfig,
    HolisticScore,
    HostEvidence,
    gpu_value,
    holistic_score,
    host_factor,
    load_holistic_config,
)
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
    "GpuEvidence",
    "HolisticConfig",
    "HolisticScore",
    "HostEvidence",
    "ScoringConfig",
    "ScoringError",
    "decay_missed",
    "decay_score",
    "ema_update",
    "gpu_value",
    "holistic_score",
    "host_factor",
    "load_holistic_config",
    "machine_score",
    "normalise",
    "round_sample",
    "update_score",
]
