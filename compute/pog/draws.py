"""Where the validator's secret choices come from: the operating system's CSPRNG, always in production.

The openings of every proof (GEMM rows and columns, sustained segments, memory passes and rows, CPU
checkpoints, disk blocks) are drawn by the validator after the miner committed; their secrecy is
what makes a spot check sound. Every drawing function takes an ``rng`` (tests pass seeded ones) and
otherwise uses ``secrets`` -- directly, or a generator seeded from it -- unless ``oracle_rng`` has an
answer, which happens only inside ``predictable_draws``.

``predictable_draws`` exists for one caller: the fleet benchmark (``compute.lab.bench.fleet``)
runs the real validator round against simulated provers that must answer at production shapes
without production work. Inside its ``with`` block each draw is derived from the benchmark's seed,
the draw's purpose and the challenge's id (``derived_rng``), and the benchmark's prover -- told the
seed on its command line -- derives the same openings before it commits. The state is this process's
alone: no message, setting, flag or environment variable reaches it, the validator's entry points
never install it (``tests/lab/test_fleet_bench.py``), and installing it logs a warning.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

log = logging.getLogger(__name__)

GEMM_OPENINGS = "gemm-openings"
SUSTAINED_SEGMENTS = "sustained-segments"
MEMORY_PASSES = "memory-passes"
MEMORY_ROWS = "memory-rows"
CPU_CHECKS = "cpu-checks"
DISK_BLOCKS = "disk-blocks"

_ORACLE: list[bytes] = []  # the benchmark seed while ``predictable_draws`` is active
_LOCK = threading.Lock()


def derived_rng(seed: bytes, purpose: str, context: str) -> np.random.Generator:
    """The generator both sides of the fleet benchmark derive for one draw (never used otherwise)."""
    tag = b"compute-fleet-bench-draws|" + seed + b"|" + purpose.encode() + b"|" + context.encode()
    return np.random.default_rng(int.from_bytes(hashlib.blake2b(tag, digest_size=32).digest(), "little"))


def oracle_rng(purpose: str, context: str) -> np.random.Generator | None:
    """The benchmark's generator for this draw inside ``predictable_draws``; None (use secrets) otherwise."""
    seed = _ORACLE[0] if _ORACLE else None
    return None if seed is None else derived_rng(seed, purpose, context)


def draws_predictable() -> bool:
    """Whether this process's secret draws are currently replaced (only ever in the fleet benchmark)."""
    return bool(_ORACLE)


@contextmanager
def predictable_draws(seed: bytes) -> Iterator[None]:
    """Derive this process's validator draws from ``seed`` (the fleet benchmark only; see the docstring)."""
    if len(seed) < 16:
        raise ValueError("the benchmark seed must have at least 16 bytes")
    with _LOCK:
        if _ORACLE:
            raise RuntimeError("predictable draws are already installed in this process")
        _ORACLE.append(bytes(seed))
    log.warning("fleet benchmark: the validator's secret draws are PREDICTABLE in this process")
    try:
        yield
    finally:
        with _LOCK:
            _ORACLE.clear()
