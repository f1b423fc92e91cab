"""``python -m compute.pog {bench,worker}``: benchmark the engine, or print/run the worker script."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _depth(args: argparse.Namespace) -> int:
    """``--suite memory|sustained|scaling|host|depth``: figures of the in-depth proofs."""
    from .depth_bench import SUITES, run_depth_suite

    device = "cuda" if args.device == "cuda" else "cpu"
    names = SUITES if args.suite == "depth" else (args.suite,)
    results = {name: run_depth_suite(name, device) for name in names}
    if args.json:
        sys.stdout.write(json.dumps(results, default=str) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    for name, figures in results.items():
        table = Table(title=f"Proof-of-GPU {name} suite ({device})")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for key, value in figures.items():
            table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
        Console().print(table)
    return 0


def _table(title: str, figures: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    Console().print(table)


def _verify_suite(args: argparse.Namespace) -> int:
    """``--suite verify``: the verifier's cost at the H100 validator shapes, every backend (no GEMM)."""
    from .bench import verify_suite

    figures = verify_suite(args.verify_tflops)
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
    else:
        _table("Proof-of-GPU verification (one core)", figures)
    return 0


def _verdicts(args: argparse.Namespace) -> int:
    """``--suite verdicts``: honest and shortcut errors at production n against the tolerance."""
    from .verdicts_bench import run_verdicts

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
            table = Table(title=title + f", model margin {report['model_margin']:.2f}x")
            for column in ("order", "rms", "largest / tol or round pass probability"):
                table.add_column(column)
            for name, fig in report["honest"].items():
                table.add_row(f"honest: {name}", f"{fig['rms']:.3g}", f"{fig['max_over_tol']:.3g}")
            for name, fig in report["shortcuts"].items():
                table.add_row(name, f"{fig['rms']:.3g}", f"{fig['round_pass_probability']:.3g}")
            Console().print(table)
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.suite == "verify":
        return _verify_suite(args)
    if args.suite == "verdicts":
        return _verdicts(args)
    if args.suite != "gemm":
        return _depth(args)
    from .bench import run_bench

    result = run_bench(
        args.device,
        args.precision,
        args.m,
        args.n or 4096,
        args.p,
        args.verify_n,
        args.repeat,
        threads=args.threads,
        verify_tflops=args.verify_tflops,
    )
    if args.json:
        sys.stdout.write(json.dumps(result.as_dict()) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"Proof-of-GPU benchmark ({result.device}, {result.precision}, {result.m}x{result.n}x{result.p})"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in result.as_dict().items():
        table.add_row(name, f"{value:.4g}" if isinstance(value, float) else str(value))
    Console().print(table)
    return 0


def _worker(args: argparse.Namespace) -> int:
    from .worker import worker_script
    from .worker_main import main as worker_main

    if args.run:
        return worker_main(["--device", args.device])
    source, digest = worker_script()
    if args.output:
        Path(args.output).write_text(source, encoding="utf-8")
        sys.stdout.write(f"{args.output} sha256={digest}\n")
    else:
        sys.stdout.write(source)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compute.pog", description="Proof-of-GPU engine tools")
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("bench", help="prover overhead over a plain GEMM, verification cost")
    bench.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    bench.add_argument("--precision", choices=("fp16", "bf16", "fp32"), default="fp32")
    bench.add_argument("--m", type=int, default=4096)
    bench.add_argument(
        "--n", type=int, default=None, help="inner size (gemm: 4096; verdicts: the table's production sizes)"
    )
    bench.add_argument("--p", type=int, default=4096)
    bench.add_argument("--verify-n", type=int, default=None, help="also time verification at this inner size")
    bench.add_argument("--repeat", type=int, default=5, help="interleaved GEMM/commit runs; best of each (5)")
    bench.add_argument("--threads", type=int, default=None, help="CPU threads of the prover (all cores)")
    bench.add_argument(
        "--verify-tflops",
        type=float,
        default=None,
        help="throughput that sizes n of the verify_h100_fp16_* figures (default: H100 SXM fp16 from the table)",
    )
    bench.add_argument(
        "--entries", type=int, default=8, help="verdicts: sampled entries per size and order (8)"
    )
    bench.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    bench.add_argument(
        "--suite",
        choices=("gemm", "verify", "memory", "sustained", "scaling", "host", "depth", "verdicts"),
        default="gemm",
        help="gemm (default), verify (verifier cost only), one in-depth suite, depth = all four, "
        "or verdicts (tolerance against honest and shortcut errors)",
    )
    worker = sub.add_parser("worker", help="print or write the worker script, or run it here")
    worker.add_argument("--output", help="write the script to this path and print its sha256")
    worker.add_argument("--run", action="store_true", help="serve JSON lines on stdin/stdout")
    worker.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = parser.parse_args(argv)
    return _bench(args) if args.command == "bench" else _worker(args)


if __name__ == "__main__":
    sys.exit(main())
