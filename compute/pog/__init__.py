"""Proof-of-GPU engine: keyed GEMM challenges, Merkle commitments, exact spot-check verification.

A round: ``new_challenge`` -> prover ``commit`` (timed by the validator) -> ``choose_openings`` ->
prover ``open`` -> ``verify`` (numpy only, never raises) -> ``identify`` from measured throughput.
In production the prover is ``worker_script()`` run on the miner's machine over SSH.
"""

from __future__ import annotations

from .challenge import choose_openings, new_challenge
from .engine import EngineError
from .identify import GpuTable, Identification, identify, load_gpu_table
from .prover import Prover, ProverError
from .verifier import GpuVerdict, Verdict, tolerance, verify
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
    "EngineError",
    "GpuOpening",
    "GpuTable",
    "GpuTimings",
    "GpuVerdict",
    "Identification",
    "Opening",
    "OpeningRequest",
    "Precision",
    "Prover",
    "ProverError",
    "RowProof",
    "Timings",
    "Verdict",
    "WireError",
    "choose_openings",
    "identify",
    "load_gpu_table",
    "new_challenge",
    "parse_message",
    "tolerance",
    "verify",
    "worker_script",
]
