"""``python -m compute bench fleet``: one real validator round against a simulated subnet.

Starts the miners' child processes (``miners.py``), runs the round in this process (``run.py``), stops
the miners and prints the figures (``--json``: one object). Exit status 1 unless every miner verified.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

FIRST_PORT = 47000


def parser() -> argparse.ArgumentParser:
    fleet = argparse.ArgumentParser(
        prog="python -m compute bench fleet",
        description="one real validator round against N simulated 8-GPU miners",
    )
    fleet.add_argument("--miners", type=int, default=256, help="simulated miners (default 256)")
    fleet.add_argument("--gpus", type=int, default=8, help="H100s each miner claims (default 8)")
    fleet.add_argument("--concurrency", type=int, default=16, help="miners tested at once (default 16)")
    fleet.add_argument(
        "--verify-workers",
        type=int,
        default=-1,
        help="verification pool processes (default -1: one per core; 0: a thread)",
    )
    fleet.add_argument(
        "--canary-rate", type=float, default=0.1, help="chance per miner of a canary rental (default 0.1)"
    )
    fleet.add_argument(
        "--first-round",
        action="store_true",
        help="every miner is new: all run the sustained run and host probes (default: a steady-state round)",
    )
    fleet.add_argument(
        "--miner-timeout", type=float, default=600.0, help="seconds allowed per miner test (default 600)"
    )
    fleet.add_argument(
        "--sustained-seconds",
        type=float,
        default=60.0,
        help="length of a sustained run (default 60, the validator's; shorter for quick runs)",
    )
    fleet.add_argument(
        "--miner-processes",
        type=int,
        default=1,
        help="processes the simulated miners run in, miners dealt round-robin (default 1; more: fewer "
        "late simulated answers, more of the machine's CPU taken from the validator measured)",
    )
    fleet.add_argument("--json", action="store_true", help="one JSON object on stdout")
    fleet.add_argument("--serve-miners", type=int, default=0, help=argparse.SUPPRESS)
    fleet.add_argument("--miner-slice", default="0:1", help=argparse.SUPPRESS)  # START:STEP of the indices
    fleet.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    fleet.add_argument("--seed", default=None, help=argparse.SUPPRESS)
    return fleet


def _check(args: argparse.Namespace) -> str | None:
    if not 1 <= args.miners <= 1024 or not 1 <= args.gpus <= 16:
        return "--miners must be 1..1024 and --gpus 1..16"
    if not 1 <= args.concurrency <= 1024 or not -1 <= args.verify_workers <= 64:
        return "--concurrency must be 1..1024 and --verify-workers -1..64"
    if not 1 <= args.miner_processes <= 64:
        return "--miner-processes must be 1..64"
    if not 0 <= args.canary_rate <= 1 or args.miner_timeout <= 0 or not 1 <= args.sustained_seconds <= 3600:
        return "--canary-rate must be 0..1, --miner-timeout positive, --sustained-seconds 1..3600"
    return None


def _print(figures: dict, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(figures) + "\n")
        return
    for key, value in figures.items():
        sys.stdout.write(f"{key:>26}: {value}\n")


def _start_miners(args: argparse.Namespace, tmp: str, seed: bytes, part: range) -> subprocess.Popen:
    command = [sys.executable, "-m", "compute.lab", "fleet", "--serve-miners", str(args.miners)]
    command += ["--miner-slice", f"{part.start}:{part.step}", "--gpus", str(args.gpus), "--dir", tmp]
    command += ["--seed", seed.hex()]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from compute.lab.bench.fleet.miners import merge_reports, serve_miners, split
    from compute.lab.bench.fleet.run import FleetOptions, report, run_round

    if args.serve_miners:  # a child: plumbing between this command and itself
        logging.basicConfig(level=logging.ERROR)
        seed = bytes.fromhex(args.seed)
        start, step = (int(x) for x in args.miner_slice.split(":"))
        indices = range(start, args.serve_miners, step)
        asyncio.run(serve_miners(indices, args.gpus, Path(args.dir), seed, FIRST_PORT))
        return 0
    problem = _check(args)
    if problem:
        print(f"fleet: {problem}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    options = FleetOptions(
        miners=args.miners,
        gpus=args.gpus,
        concurrency=args.concurrency,
        verify_workers=args.verify_workers,
        canary_rate=args.canary_rate,
        steady=not args.first_round,
        miner_timeout=args.miner_timeout,
        sustained_seconds=args.sustained_seconds,
    )
    seed = secrets.token_bytes(32)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        children = [_start_miners(args, tmp, seed, part) for part in split(args.miners, args.miner_processes)]
        try:
            miners: list[dict] = []
            for child in children:
                assert child.stdout is not None
                line = child.stdout.readline()
                if not line:
                    print(
                        f"fleet: a miners' process exited {child.wait(30)} before serving",
                        file=sys.stderr,
                    )
                    return 1
                miners += json.loads(line)
            miners.sort(key=lambda miner: miner["index"])  # the round's uids follow the indices
            measured = asyncio.run(run_round(options, Path(tmp), miners, seed))
        finally:
            for child in children:
                assert child.stdin is not None
                child.stdin.close()
        reports = []
        for child in children:
            assert child.stdout is not None
            reports.append(json.loads(child.stdout.readline() or "{}"))
            child.wait(60)
        miners_side = merge_reports(reports)
    figures = report(options, measured, miners_side)
    _print(figures, args.json)
    return 0 if figures["verified"] == args.miners else 1
