"""Memory proof v2: full-entropy uint32 data, exact passes mod 2^32, a keyed nonlinear step, all GPUs
in lockstep. ``kernel`` and ``prover`` run in the worker; ``wire`` and ``verify`` on the validator.
The same proof on device ``cpu`` proves host RAM (``compute.pog.host``)."""

from __future__ import annotations

from .prover import MemoryEngine
from .verify import (
    GpuMemoryResult,
    MemoryVerdict,
    check_rows,
    expected_rows,
    judge_memory_timing,
    proven_bytes,
    verify_memory,
)
from .wire import (
    MemoryChallenge,
    MemoryCommitment,
    MemoryOpening,
    MemoryOpenRequest,
    MemoryPolicy,
    choose_memory_openings,
    plan_memory,
)

__all__ = [
    "GpuMemoryResult",
    "MemoryChallenge",
    "MemoryCommitment",
    "MemoryEngine",
    "MemoryOpenRequest",
    "MemoryOpening",
    "MemoryPolicy",
    "MemoryVerdict",
    "check_rows",
    "choose_memory_openings",
    "expected_rows",
    "judge_memory_timing",
    "plan_memory",
    "proven_bytes",
    "verify_memory",
]
