"""Pure scoring math: GPU identification (naming), the value function (credit from proven figures),
the holistic score (GPU credit x sustained factor x host factor x rental), moving averages, weight
normalisation, and the explanation of a sample's terms for people (``explain``). It imports nothing from ``compute.pog`` or ``compute.validator`` (no import circles)."""

from __future__ import annotations

from compute.scoring.explain import EmaStep, Explanation, explain
from compute.scoring.holistic import (
    HolisticConfig,
    HolisticScore,
    HostEvidence,
    holistic_score,
    host_factor,
    load_holistic_config,
    value_shape,
)
from compute.scoring.identify import (
    UNIDENTIFIED,
    GpuModel,
    GpuTable,
    GpuTableError,
    Identification,
    identify,
    load_gpu_table,
)
from compute.scoring.presence import DEFAULT_WINDOW, presence_credit, presence_shares
from compute.scoring.score import (
    ScoringConfig,
    ScoringError,
    decay_missed,
    decay_score,
    ema_update,
    normalise,
    round_sample,
    update_score,
)
from compute.scoring.value import GpuCredit, ProvenGpu, ValueShape, gpu_credit

__all__ = [
    "DEFAULT_WINDOW",
    "UNIDENTIFIED",
    "EmaStep",
    "Explanation",
    "GpuCredit",
    "GpuModel",
    "GpuTable",
    "GpuTableError",
    "HolisticConfig",
    "HolisticScore",
    "HostEvidence",
    "Identification",
    "ProvenGpu",
    "ScoringConfig",
    "ScoringError",
    "ValueShape",
    "decay_missed",
    "decay_score",
    "ema_update",
    "explain",
    "gpu_credit",
    "holistic_score",
    "host_factor",
    "identify",
    "load_gpu_table",
    "load_holistic_config",
    "normalise",
    "presence_credit",
    "presence_shares",
    "round_sample",
    "update_score",
    "value_shape",
]
