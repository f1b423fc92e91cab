"""``python -m compute bench dashboard [--json]``: first render of the dashboard on a full store.

Fills a fresh validator store with ``--miners`` miners and ``--days`` of history (a round every
``--round-minutes``, a weight setting every ``--weights-minutes``, one PoG result and one score
update per miner per round), serves the dashboard over real HTTP on 127.0.0.1 and times the first
GET / (cold: the store never read by this process; only ``/healthz`` was asked first, to know
the server is up) and the median of further ones. Target: first
render <= 300 ms for 256 miners x 30 days. With ``--flood``: how far a page flood moves the
validator's clock (:mod:`compute.lab.bench.dashboard_flood`; target <= 5 ms at p95).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from compute.dashboard.app import build_app
from compute.sqlitedb import immediate
from compute.store import ValidatorStore
from compute.transport import serve_in_thread

TARGET_MS = 300.0


def _result_row(round_id: int, uid: int, created: float, rng: random.Random) -> tuple:
    ok = rng.random() > 0.05
    return (
        round_id,
        uid,
        f"5Hotkey{uid:04d}",
        int(ok),
        rng.random() if ok else 0.0,
        int(rng.random() < 0.2),
        "[]" if ok else '["tflops below the GPU table"]',
        json.dumps(["NVIDIA H100 80GB HBM3"] * 8),
        700.0 + rng.random() * 50,
        60.0 + rng.random() * 5,
        8,
        "{}",
        round_id * 360,
        created,
        3000.0 + rng.random() * 300,
        78.0,
    )


def fill_store(path: Path, miners: int, days: float, round_minutes: float, weights_minutes: float) -> int:
    """A store with the given history ending now; returns the number of PoG result rows."""
    store = ValidatorStore(path)
    store.sync_miners((uid, f"5Hotkey{uid:04d}") for uid in range(miners))
    rng = random.Random(7)
    now = time.time()
    start = now - days * 86_400
    rounds = int(days * 1440 / round_minutes)
    columns = "round_id, uid, hotkey, ok, sample, rented, reasons, models, tflops_fp16, tflops_fp32, "
    columns += "gpu_count, timings, block, created, mem_gbs, mem_proven_gb"
    with store._lock, immediate(store._db) as db:  # bulk fill: one transaction, not one per row
        for index in range(rounds):
            started = start + index * round_minutes * 60
            round_id = index + 1
            db.execute(
                "INSERT INTO rounds VALUES (?, ?, ?, ?)", (round_id, round_id * 360, started, started + 600)
            )
            db.executemany(
                f"INSERT INTO pog_results ({columns}) VALUES ({','.join('?' * 16)})",
                [_result_row(round_id, uid, started + 300, rng) for uid in range(miners)],
            )
            db.executemany(
                "INSERT INTO score_updates VALUES (?, ?, ?, ?, ?)",
                [(round_id, uid, f"5Hotkey{uid:04d}", None, rng.random()) for uid in range(miners)],
            )
        db.executemany(
            "INSERT INTO scores VALUES (?, ?, ?, ?)",
            [(uid, f"5Hotkey{uid:04d}", rng.random(), now) for uid in range(miners)],
        )
        weights = json.dumps({str(uid): 1.0 / miners for uid in range(miners)})
        sets = int(days * 1440 / weights_minutes)
        db.executemany(
            "INSERT INTO weights_set (block, weights, version_key, ok, error, created) VALUES (?,?,?,?,?,?)",
            [(i * 100, weights, 1, 1, None, start + i * weights_minutes * 60) for i in range(sets)],
        )
    store.close()
    return rounds * miners


def measure(path: Path, repeats: int) -> tuple[float, float, int]:
    """(first render ms, median ms of the next ``repeats``, page bytes) over real HTTP."""
    server = serve_in_thread(build_app(path))
    try:
        with httpx.Client(timeout=30) as client:  # one client: its TLS setup is not the page's cost
            client.get(server.url + "/healthz").raise_for_status()  # server up, store untouched
            t0 = time.perf_counter()
            first = client.get(server.url + "/")
            first_ms = (time.perf_counter() - t0) * 1000
            first.raise_for_status()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                client.get(server.url + "/").raise_for_status()
                times.append((time.perf_counter() - t0) * 1000)
        return first_ms, statistics.median(times) if times else first_ms, len(first.content)
    finally:
        server.stop()


def _flood(args: argparse.Namespace) -> int:
    import asyncio
    import os

    from compute.lab.bench.dashboard_flood import TARGET_DELTA_MS, run_flood_bench

    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        path = Path(tmp) / "validator.db"
        fill_store(path, args.miners, args.days, args.round_minutes, args.weights_minutes)
        figures = {"load_average": [round(x, 2) for x in os.getloadavg()], "miners": args.miners}
        figures |= asyncio.run(run_flood_bench(path, args.clients, args.seconds, 0.02))
    if args.json:
        print(json.dumps(figures))
    else:
        for phase in ("baseline", "child", "in_loop"):
            print(f"{phase:9s} {figures[phase]}")
        print(
            f"page flood moves the validator's clock (p95) by {figures['child_delta_p95_ms']:.2f} ms "
            f"(target <= {TARGET_DELTA_MS:g} ms); served from the validator's own loop it moved it by "
            f"{figures['in_loop_delta_p95_ms']:.2f} ms; load {figures['load_average']}"
        )
    return 0 if figures["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compute bench dashboard", description=__doc__)
    parser.add_argument("--miners", type=int, default=256)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--round-minutes", type=float, default=72.0, help="360 blocks of 12 s (default 72)")
    parser.add_argument("--weights-minutes", type=float, default=20.0, help="100 blocks of 12 s (default 20)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--flood",
        action="store_true",
        help="time the validator's clock under a page flood instead (floodbench)",
    )
    parser.add_argument("--clients", type=int, default=16, help="with --flood: concurrent page clients (16)")
    parser.add_argument("--seconds", type=float, default=15.0, help="with --flood: seconds per phase (15)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.flood:
        return _flood(args)
    if args.miners < 1 or args.days <= 0 or args.round_minutes <= 0 or args.weights_minutes <= 0:
        print("--miners, --days, --round-minutes and --weights-minutes must be positive", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        path = Path(tmp) / "validator.db"
        t0 = time.perf_counter()
        rows = fill_store(path, args.miners, args.days, args.round_minutes, args.weights_minutes)
        fill_s = time.perf_counter() - t0
        first_ms, median_ms, size = measure(path, args.repeats)
    figures = {
        "miners": args.miners,
        "days": args.days,
        "pog_rows": rows,
        "fill_s": round(fill_s, 2),
        "first_render_ms": round(first_ms, 1),
        "median_render_ms": round(median_ms, 1),
        "page_bytes": size,
        "target_ms": TARGET_MS,
        "ok": first_ms <= TARGET_MS,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"dashboard, {args.miners} miners x {args.days:g} days ({rows} PoG rows): first render "
            f"{first_ms:.0f} ms, median {median_ms:.0f} ms (target <= {TARGET_MS:.0f} ms), {size} bytes"
        )
    return 0 if figures["ok"] else 1
