"""How big a GEMM challenge is, from the throughput the validator expects of the claimed GPUs.

The expectation only sizes the work (so compute takes ~``target_seconds``); the score comes from
the time the validator measured on its own clock.
"""

from __future__ import annotations

import math

from compute.protocol import MachineSpecs
from compute.scoring import GpuTable
from compute.validator.params import RoundParams

CHUNK = 4096
MAX_N = 1 << 26
RUNS = 2  # timed runs per precision (the fastest counts), each of ``run_size(n)``


def run_size(n: int) -> int:
    """Inner size of each of the ``RUNS`` timed runs that together do about the work of ``n``."""
    return max(min(CHUNK, n), n // RUNS // CHUNK * CHUNK)


def challenge_size(
    params: RoundParams, precision: str, expected_tflops: float | None
) -> tuple[int, int, int]:
    """(m, n, p): fixed when ``pog_n`` is set, else n sized so compute takes ~target_seconds."""
    m, p = params.pog_m, params.pog_p
    if params.pog_n > 0:
        return m, params.pog_n, p
    flops = (expected_tflops or 1.0) * 1e12 * params.target_seconds
    n = max(CHUNK, math.ceil(flops / (2 * m * p) / CHUNK) * CHUNK)
    return m, min(n, MAX_N), p


def expected_tflops(table: GpuTable, specs: MachineSpecs, precision: str) -> float | None:
    """The slowest claimed GPU's table figure; the table's median for unknown names; None for CPU."""
    names = [table.resolve_name(gpu.name) for gpu in specs.gpus]
    figures = [table.models[name].tflops(precision) for name in names if name in table.models]
    if figures:
        return min(figures)
    if not specs.gpus:
        return None
    ordered = sorted(model.tflops(precision) for model in table.models.values())
    return ordered[len(ordered) // 2]
