"""Verdicts benchmark (GEMM part): honest and shortcut errors at production n against the tolerance.

For each precision the validator uses (fp16, fp32) and each production inner size (the smallest,
the H100 SXM's and the largest the GPU table asks for, or one ``n`` given), it samples entries of a
real challenge and reports, for every accumulation order of ``compute.pog.accumulation`` and the
engine's own CPU paths, the rms and largest error and their ratio to ``tolerance``; for shortcuts
also how many sampled entries fall within the tolerance and the chance that a whole round's
opening (8 rows x the columns the verify budget allows) passes (Gaussian, from the rms; the shortcuts
nearest the tolerance are sampled with ``CLOSE_ENTRIES`` entries so that rms is stable). The tolerance of the former model
(``old_tolerance``) is printed beside it, with the entries within it, so the finding stays visible.
On CUDA (``verdicts_cuda``) the real cuBLAS paths join: the prover's product and the reduced-precision
shortcuts. Figures only; no I/O, nothing trusted.
"""

from __future__ import annotations

import math
import time

import numpy as np

from compute.lab.bench.pog_verify import validator_n
from compute.pog.accumulation import (
    Entries,
    Order,
    exact_order,
    fp32_order,
    half_accumulate,
    rounded_inputs,
    slab_fp16,
)
from compute.pog.challenge import VERIFY_BUDGET, columns_within_budget, new_challenge
from compute.pog.engine import DEFAULT_CHUNK, parse_challenge, product_cpu
from compute.pog.tolerance import closest_cheat, honest_bound, margin, tolerance

ROWS_PER_ROUND = 8
OLD_DELTA = {"fp16": 2.2e-3, "fp32": 2.6e-4, "bf16": 3.3e-2}  # the former model's cheaper-format deltas


def old_tolerance(precision: str, n: int) -> float:
    """The former tolerance: sqrt(2**-24 n / 2 x delta sqrt(n) / 3), growing like n**0.75."""
    return math.sqrt(2.0**-24 * n / 2 * OLD_DELTA[precision] * math.sqrt(n) / 3)


def closest_orders(precision: str) -> list[str]:
    """The shortcuts nearest the tolerance: sampled with ``CLOSE_ENTRIES`` entries for a stable rms."""
    half = "bf16" if precision == "bf16" else "fp16"
    if precision == "fp32":
        return [rounded_inputs("tf32").name, rounded_inputs("fp16").name]
    return [half_accumulate(16, "rn", 16, half).name, slab_fp16().name]


CLOSE_ENTRIES = 32


def honest_orders() -> list[Order]:
    return [
        fp32_order(1),
        fp32_order(1, split=4),
        fp32_order(16),
        fp32_order(8),
        fp32_order(16, split=4),
        exact_order(),
    ]


def shortcut_orders(precision: str) -> list[Order]:
    if precision == "fp32":
        return [rounded_inputs(fmt) for fmt in ("tf32", "fp16", "bf16", "e4m3")]
    half = "bf16" if precision == "bf16" else "fp16"
    accumulate = [
        half_accumulate(block, mode, mma, half)
        for block in (16, 64, 256)
        for mode in ("rn", "rz")
        for mma in (16, 1)
    ]
    inputs = ["e4m3"] if precision == "bf16" else ["bf16", "e4m3"]
    return accumulate + [slab_fp16()] + [rounded_inputs(fmt) for fmt in inputs]


def production_sizes(precision: str) -> dict[str, int]:
    """{GPU: n} of the smallest, the H100 SXM's and the largest validator challenge in the table."""
    from compute.scoring.identify import load_gpu_table  # lazy: scoring imports pog

    sizes = {name: validator_n(model.tflops(precision)) for name, model in load_gpu_table().models.items()}
    ordered = sorted(sizes, key=lambda name: sizes[name])
    picked = [ordered[0], "H100 SXM", ordered[-1]]
    return {name: sizes[name] for name in dict.fromkeys(picked) if name in sizes}


def entries_per_round(n: int) -> int:
    return ROWS_PER_ROUND * columns_within_budget(n, ROWS_PER_ROUND, 4, VERIFY_BUDGET)


def round_pass_probability(rms: float, tol: float, per_round: int) -> float:
    """Chance that every checked entry of a round lands within ``tol`` (Gaussian error of this rms)."""
    return math.erf(tol / (rms * math.sqrt(2))) ** per_round if rms > 0 else 1.0


def _sample(precision: str, n: int, count: int, seed: int) -> Entries:
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, 8192, count), rng.integers(0, 8192, count)
    return Entries(precision, rng.bytes(16), n, rows, cols)


def _errors(entries: Entries, exact: np.ndarray, order: Order, chunk: int) -> np.ndarray:
    return entries.committed(order, chunk) - exact


def engine_errors(precision: str, n: int, use_torch: bool, side: int = 4, seed: int = 0) -> np.ndarray:
    """Errors of the engine's own CPU product (numpy or torch GEMM per slab) for a side x side C."""
    challenge = new_challenge(precision, side, n, side, 1, rng=np.random.default_rng(seed))  # type: ignore[arg-type]
    out = product_cpu(parse_challenge(challenge.model_dump()), 0, 2, use_torch)
    rows, cols = np.divmod(np.arange(side * side), side)
    exact = Entries(precision, bytes.fromhex(challenge.key), n, rows, cols).exact()
    return out[rows, cols].astype(np.float64) - exact


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def size_report(precision: str, n: int, entries: int = 16, chunk: int = DEFAULT_CHUNK, seed: int = 0) -> dict:
    """Every order's error at one n: honest ones against the tolerance, shortcuts with their pass odds."""
    started = time.perf_counter()
    sample = _sample(precision, n, entries, seed)
    exact = sample.exact()
    tol, old, per_round = tolerance(precision, n, chunk), old_tolerance(precision, n), entries_per_round(n)
    honest: dict[str, dict] = {}
    for order in honest_orders():
        err = np.abs(_errors(sample, exact, order, chunk))
        honest[order.name] = {
            "rms": _rms(err),
            "max": float(err.max()),
            "max_over_tol": float(err.max() / tol),
        }
    for name, use_torch in (("numpy prover (cpu)", False), ("torch prover (cpu)", True)):
        if use_torch and not _torch_available():
            continue
        err = np.abs(engine_errors(precision, n, use_torch, seed=seed))
        honest[name] = {"rms": _rms(err), "max": float(err.max()), "max_over_tol": float(err.max() / tol)}
    shortcuts: dict[str, dict] = {}
    close = _sample(precision, n, max(CLOSE_ENTRIES, entries), seed + 1)
    close_exact = close.exact()
    for order in shortcut_orders(precision):
        near = order.name in closest_orders(precision)
        err = np.abs(
            _errors(close, close_exact, order, chunk) if near else _errors(sample, exact, order, chunk)
        )
        rms = _rms(err)
        shortcuts[order.name] = {
            "rms": rms,
            "rms_over_tol": rms / tol,
            "within_tol": f"{int((err <= tol).sum())}/{err.size}",
            "round_pass_probability": round_pass_probability(rms, tol, per_round),
            "within_old_tol": f"{int((err <= old).sum())}/{err.size}",
            "old_round_pass_probability": round_pass_probability(rms, old, per_round),
        }
    worst_honest = max(v["max_over_tol"] for v in honest.values())
    closest = min(shortcuts.values(), key=lambda v: v["rms_over_tol"])
    return {
        "n": n,
        "chunk": chunk,
        "entries": entries,
        "entries_per_round": per_round,
        "tolerance": tol,
        "honest_bound": honest_bound(n, chunk),
        "model_margin": margin(precision, n, chunk),
        "closest_cheat_model": closest_cheat(precision)[0],
        "honest_margin_measured": 1.0 / worst_honest,
        "closest_cheat_rms_over_tol": closest["rms_over_tol"],
        "old_tolerance": old,
        "honest": honest,
        "shortcuts": shortcuts,
        "seconds": time.perf_counter() - started,
    }


def _rms(err: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(err))))


def run_verdicts(
    device: str = "cpu",
    n: int | None = None,
    entries: int = 16,
    precisions: tuple[str, ...] = ("fp16", "fp32"),
) -> dict:
    """The GEMM verdict figures per precision and size (``n`` given: that size only, labelled "given")."""
    out: dict = {}
    for precision in precisions:
        sizes = {"given": n} if n else production_sizes(precision)
        out[precision] = {gpu: size_report(precision, size, entries) for gpu, size in sizes.items()}
        if device == "cuda":
            from compute.lab.bench.pog_verdicts_cuda import cuda_report

            for gpu, size in sizes.items():
                out[precision][gpu]["cuda"] = cuda_report(precision, size)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m compute bench pog-verdicts", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="cuda adds cuBLAS")
    parser.add_argument(
        "--n", type=int, default=None, help="one inner size (default: the table's production sizes)"
    )
    parser.add_argument("--entries", type=int, default=8, help="sampled entries per size and order (8)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = parser.parse_args(argv)
    device = "cuda" if args.device == "cuda" else "cpu"
    results = run_verdicts(device, n=args.n, entries=args.entries)
    if args.json:
        sys.stdout.write(json.dumps(results, default=str) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    for precision, sizes in results.items():
        for gpu, report in sizes.items():
            title = f"{precision} n={report['n']} ({gpu}): tolerance {report['tolerance']:.3g}"
            out = Table(title=title + f", model margin {report['model_margin']:.2f}x")
            for column in ("order", "rms", "largest / tol or round pass probability"):
                out.add_column(column)
            for name, fig in report["honest"].items():
                out.add_row(f"honest: {name}", f"{fig['rms']:.3g}", f"{fig['max_over_tol']:.3g}")
            for name, fig in report["shortcuts"].items():
                out.add_row(name, f"{fig['rms']:.3g}", f"{fig['round_pass_probability']:.3g}")
            Console().print(out)
    return 0
