"""``python -m compute.pog worker``: print or write the worker script, or run it here.

The engine's benchmarks live in the lab: ``python -m compute bench pog`` (and ``pog-verify``,
``pog-depth``, ``pog-verdicts``, ``pog-gen``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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
    parser = argparse.ArgumentParser(prog="python -m compute.pog", description="Proof-of-GPU worker")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker", help="print or write the worker script, or run it here")
    worker.add_argument("--output", help="write the script to this path and print its sha256")
    worker.add_argument("--run", action="store_true", help="serve JSON lines on stdin/stdout")
    worker.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    return _worker(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
