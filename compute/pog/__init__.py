"""Proof-of-GPU engine: keyed GEMM challenges, Merkle commitments, exact spot-check verification.

A round: ``new_challenge`` -> prover ``commit`` (timed by the validator) -> ``choose_openings`` ->
prover ``open`` -> ``verify`` (never raises; exact recomputation with numba or numpy, across cores
with ``verify_async``/``VerifyPool``); identification and credit from the measured
throughput live in ``compute.scoring`` (``identify``, ``value``).
In production the prover is ``worker_script()`` run on the miner's machine over SSH.
"""

from __future__ import annotations

from .challenge import choose_openings, new_challenge
from .engine import EngineError
from .host import (
    HostPolicy,
    ProbeCheck,
    check_cpu,
    check_disk,
    cpu_request,
    disk_read_request,
    disk_write_request,
    ram_challenge,
)
from .memory import (
    MemoryChallenge,
    MemoryCommitment,
    MemoryOpening,
    MemoryOpenRequest,
    MemoryPolicy,
    MemoryVerdict,
    check_rows,
    choose_memory_openings,
    judge_memory_timing,
    plan_memory,
    proven_bytes,
    verify_memory,
)
from .prover import Prover, ProverError
from .scaling import Credit, credited_gpus, history_after, scaling_efficiency, uuid_change
from .sustained import (
    SustainedPlan,
    SustainedReport,
    analyse_series,
    choose_segments,
    plan_sustained,
    sustained_factor,
)
from .tolerance import tolerance
from .verifier import GpuVerdict, Verdict, verify
from .verify_pool import VerifyPool, close_pools, shared_pool, verify_async
from .wire import (
    B64Array,
    Challenge,
    Commitment,
    GpuOpening,
    GpuTimings,
    Opening,
    OpeningRequest,
    Precision,
    RowProof,
    Timings,
    WireError,
    parse_message,
)
from .worker import worker_script

__all__ = [
    "B64Array",
    "Challenge",
    "Commitment",
    "Credit",
    "EngineError",
    "GpuOpening",
    "GpuTimings",
    "GpuVerdict",
    "HostPolicy",
    "MemoryChallenge",
    "MemoryCommitment",
    "MemoryOpenRequest",
    "MemoryOpening",
    "MemoryPolicy",
    "MemoryVerdict",
    "Opening",
    "OpeningRequest",
    "Precision",
    "ProbeCheck",
    "Prover",
    "ProverError",
    "RowProof",
    "SustainedPlan",
    "SustainedReport",
    "Timings",
    "Verdict",
    "VerifyPool",
    "WireError",
    "analyse_series",
    "check_cpu",
    "check_disk",
    "check_rows",
    "close_pools",
    "cpu_request",
    "disk_read_request",
    "disk_write_request",
    "choose_memory_openings",
    "choose_openings",
    "choose_segments",
    "credited_gpus",
    "history_after",
    "judge_memory_timing",
    "new_challenge",
    "parse_message",
    "plan_memory",
    "plan_sustained",
    "proven_bytes",
    "ram_challenge",
    "scaling_efficiency",
    "shared_pool",
    "sustained_factor",
    "tolerance",
    "uuid_change",
    "verify",
    "verify_async",
    "verify_memory",
    "worker_script",
]
