"""Validator-side cost of a GEMM verification at a real shape: CPU seconds, peak memory, scaling in n.

``synthetic_round`` builds an honest opening at any n without computing the product: only the
checked entries are computed (exactly), the rest of each opened row is zeros, and the Merkle tree
is built over placeholder leaves. ``measure_verify`` then times ``verify`` (best of 3) on the CPU
clock of this process (all threads), untraced, and records in one more run the peak of Python/numpy
allocations (tracemalloc) above what was allocated before, so the figure is the verifier's own working
memory. ``backend`` times one recomputation backend ("numba", "numpy"; "auto": what ``verify``
picks); ``verify_figures`` reports both. Nothing here is trusted.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from compute.pog.challenge import VERIFY_BUDGET, choose_openings, new_challenge
from compute.pog.merkle import MerkleTree, leaf_hash
from compute.pog.recompute import expected_entries, expected_for
from compute.pog.verifier import verify
from compute.pog.verify_kernel import kernel_available
from compute.pog.wire import B64Array, Commitment, GpuOpening, Opening, Precision, RowProof

# the validator's default shape (compute.validator.settings): m = p = 8192, n sized so the
# expected commit takes target_seconds on the identified model, rounded up to the chunk
VALIDATOR_MP = 8192
VALIDATOR_TARGET_S = 3.0
VALIDATOR_CHUNK = 4096
REFERENCE_GPU = "H100 SXM"  # the verify and roofline figures are at this model's validator shape


@dataclass(frozen=True)
class VerifyCost:
    n: int
    cols_per_row: int
    cpu_s: float
    wall_s: float
    peak_mb: float


def validator_n(expected_tflops: float, m: int = VALIDATOR_MP, p: int = VALIDATOR_MP) -> int:
    """The inner size the validator asks a GPU of ``expected_tflops`` for (``round.challenge_size``)."""
    flops = expected_tflops * 1e12 * VALIDATOR_TARGET_S
    return max(VALIDATOR_CHUNK, math.ceil(flops / (2 * m * p) / VALIDATOR_CHUNK) * VALIDATOR_CHUNK)


def synthetic_round(
    precision: Precision,
    n: int,
    m: int = VALIDATOR_MP,
    p: int = VALIDATOR_MP,
    rows: int = 8,
    cols: int = 4,
    budget: int | None = VERIFY_BUDGET,
):
    """(challenge, commitment, request, opening) of an honest one-GPU round, checked entries only."""
    challenge = new_challenge(precision, m, n, p, 1)
    request = choose_openings(challenge, rows, cols, budget=budget)
    opened, checked = request.rows[0], request.cols[0]
    exact = expected_entries(challenge, 0, opened, checked)
    c_rows = np.zeros((len(opened), p), dtype=np.float32)
    at = 0
    for k, row_cols in enumerate(checked):
        c_rows[k, row_cols] = exact[at : at + len(row_cols)]
        at += len(row_cols)
    cid = bytes.fromhex(challenge.challenge_id)
    placeholder = leaf_hash(cid, 0, 0, np.zeros(1, np.float32))
    leaves = [placeholder] * m
    for k, i in enumerate(opened):
        leaves[i] = leaf_hash(cid, 0, i, c_rows[k])
    tree = MerkleTree(leaves)
    proofs = [
        RowProof(index=i, row=B64Array.from_numpy(c_rows[k]), path=[h.hex() for h in tree.path(i)])
        for k, i in enumerate(opened)
    ]
    opening = Opening(challenge_id=challenge.challenge_id, per_gpu=[GpuOpening(rows=proofs)])
    commitment = Commitment(challenge_id=challenge.challenge_id, roots=[tree.root.hex()])
    return challenge, commitment, request, opening


def _timed_verify(parts, trace: bool = False, backend: str = "auto") -> tuple[float, float, float]:
    """(CPU s, wall s, peak traced bytes) of one ``verify`` of ``parts``; the peak only with ``trace``.

    tracemalloc hooks every allocation (~25% slower here), and the validator never runs under it:
    timed runs are untraced and one extra run measures the peak.
    """
    if trace:
        tracemalloc.start()
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        expected = None if backend == "auto" else expected_for(parts[0], parts[2], backend)
        challenge, commitment, request, opening = parts
        verdict = verify(challenge, commitment, request, opening, expected=expected)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        peak = tracemalloc.get_traced_memory()[1] if trace else 0
    finally:
        if trace:
            tracemalloc.stop()
    if not verdict.ok:
        raise RuntimeError(f"synthetic honest opening failed verification: {verdict.reasons}")
    return cpu, wall, peak


def measure_verify(
    precision: Precision,
    n: int,
    rows: int = 8,
    cols: int = 4,
    budget: int | None = VERIFY_BUDGET,
    repeats: int = 3,
    backend: str = "auto",
) -> VerifyCost:
    """Best-of-``repeats`` CPU and wall seconds, and peak allocated MB, of verifying one honest opening.

    The best run is the least disturbed by other work on the machine (the figure is the verifier's own
    cost); the peak comes from one more, traced run.
    """
    parts = synthetic_round(precision, n, rows=rows, cols=cols, budget=budget)
    _timed_verify(parts, backend=backend)  # first use: the compiled kernel loads, buffers fault in
    runs = [_timed_verify(parts, backend=backend) for _ in range(max(1, repeats))]
    runs.append(_timed_verify(parts, trace=True, backend=backend))
    cols_per_row = len(parts[2].cols[0][0])  # after the verify budget (challenge.columns_within_budget)
    return VerifyCost(
        n=n,
        cols_per_row=cols_per_row,
        cpu_s=min(r[0] for r in runs[:-1]),
        wall_s=min(r[1] for r in runs[:-1]),
        peak_mb=max(r[2] for r in runs) / 1e6,
    )


def backends() -> list[str]:
    """The recomputation backends this process can time: numpy, and numba when it is installed."""
    return ["numba", "numpy"] if kernel_available() else ["numpy"]


def verify_figures(expected_tflops: float, precision: Precision = "fp16", cols: int = 4) -> dict:
    """``verify_<...>`` figures at the validator's shape for a GPU of ``expected_tflops``.

    ``verify_cpu_s`` is the backend ``verify`` uses here (``verify_backend``); ``verify_cpu_s_<backend>``
    times each available backend on the same opening.
    """
    n = validator_n(expected_tflops)
    quarter = max(VALIDATOR_CHUNK, n // 4)
    full = measure_verify(precision, n, cols=cols)  # the opening the validator draws at this n
    small = measure_verify(precision, quarter, cols=full.cols_per_row, budget=None)  # same opening shape
    figures = {
        "verify_n": n,
        "verify_cols_per_row": full.cols_per_row,
        "verify_cpu_s": full.cpu_s,
        "verify_wall_s": full.wall_s,
        "verify_peak_mb": full.peak_mb,
        "verify_scaling_4x": full.cpu_s / small.cpu_s * (quarter * 4 / n),
        "verify_backend": backends()[0],
    }
    for backend in backends():
        figures[f"verify_cpu_s_{backend}"] = measure_verify(precision, n, cols=cols, backend=backend).cpu_s
    return figures


def reference_model() -> tuple[float, float]:
    """(tflops_fp16, bandwidth_gbs) of ``REFERENCE_GPU`` in the GPU table."""
    from compute.scoring.identify import load_gpu_table  # lazy: scoring imports pog

    model = load_gpu_table().models[REFERENCE_GPU]
    return model.tflops("fp16"), float(model.bandwidth_gbs)


def verify_suite(
    verify_tflops: float | None = None, precisions: tuple[Precision, ...] = ("fp16", "fp32")
) -> dict:
    """Verifier cost at the reference GPU's validator shape per precision, every backend available.

    ``verify_h100_<precision>_s`` is what ``verify`` costs here (``verify_h100_<precision>_backend``),
    ``verify_h100_<precision>_s_numba`` / ``_s_numpy`` each backend on the same opening; with
    ``verify_tflops`` the fp16 shape is sized from that throughput instead of the table.
    """
    from compute.scoring.identify import load_gpu_table  # lazy: scoring imports pog

    model = load_gpu_table().models[REFERENCE_GPU]
    figures: dict = {}
    for precision in precisions:
        tflops = model.tflops(precision)
        if verify_tflops is not None:
            tflops = (
                verify_tflops
                if precision == "fp16"
                else verify_tflops * model.tflops("fp32") / model.tflops("fp16")
            )
        prefix = f"verify_h100_{precision}_"
        for key, value in verify_figures(tflops, precision).items():
            name = key.replace("verify_", prefix, 1).replace("_cpu_s", "_s")
            figures[name] = value
        figures["verify_scaling_4x" if precision == "fp16" else f"{prefix}scaling_4x"] = figures.pop(
            f"{prefix}scaling_4x"
        )
    return figures


def main(argv: list[str] | None = None) -> int:
    import argparse

    from compute.lab.report import emit

    parser = argparse.ArgumentParser(
        prog="python -m compute bench pog-verify", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--verify-tflops",
        type=float,
        default=None,
        help="throughput that sizes n of the verify_h100_fp16_* figures (default: H100 SXM fp16 from the table)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)
    emit(verify_suite(args.verify_tflops), args.json, "Proof-of-GPU verification (one core)")
    return 0
