"""``python -m compute bench feed [--json]``: build time and size of the public machine feed.

Fills a fresh validator store like ``bench dashboard`` (``--miners`` x ``--days``, a round every
``--round-minutes``), serves the feed over real HTTP on 127.0.0.1 and times the first GET of
``/api/public/v1/machines`` (the store read, 30 days of history per miner, and the JSON), the
median rebuild after one more round (what the dashboard does once a minute: only the new rows are
read), the median of requests served from memory, and the first GET of the ``/machines`` page.
Target: a rebuild within 300 ms for 256 miners x 30 days.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from fastapi import FastAPI

from compute.dashboard.feed_routes import FEED_PATH, PAGE_PATH, add_feed_routes
from compute.dashboard.ratelimit import RateLimiter
from compute.lab.bench.dashboard import fill_store
from compute.store import PogResult, ValidatorStore
from compute.transport import serve_in_thread

TARGET_MS = 300.0  # a rebuild (once a minute, after the first)
REBUILD_S = 0.5  # the feed's freshness in this benchmark (a minute in the dashboard)


def _timed(client: httpx.Client, url: str) -> tuple[float, httpx.Response]:
    t0 = time.perf_counter()
    reply = client.get(url)
    reply.raise_for_status()
    return (time.perf_counter() - t0) * 1000, reply


def add_round(path: Path, miners: int) -> None:
    """One more finished round with a result per miner (what the validator writes each round)."""
    store = ValidatorStore(path)
    rnd = store.begin_round(block=10**9)
    for uid in range(miners):
        store.record_result(PogResult(rnd.round_id, uid, f"5Hotkey{uid:04d}", True, 1.0, created=time.time()))
    store.finish_round(rnd.round_id, [])
    store.close()


def measure(path: Path, miners: int, repeats: int) -> dict[str, float]:
    app = FastAPI()
    limiter = RateLimiter(rate_per_s=1e6, burst=1_000_000)
    add_feed_routes(app, path, validator=None, limiter=limiter, fresh_s=REBUILD_S)
    server = serve_in_thread(app)
    try:
        with httpx.Client(timeout=60) as client:
            first_ms, first = _timed(client, server.url + FEED_PATH)
            page_ms, page = _timed(client, server.url + PAGE_PATH)
            cached = [_timed(client, server.url + FEED_PATH)[0] for _ in range(repeats)]
            rebuilds = []
            for _ in range(repeats):
                add_round(path, miners)
                time.sleep(REBUILD_S)
                rebuilds.append(_timed(client, server.url + FEED_PATH)[0])
        return {
            "first_json_ms": round(first_ms, 1),
            "rebuild_json_ms": round(statistics.median(rebuilds), 1),
            "cached_json_ms": round(statistics.median(cached), 1),
            "first_page_ms": round(page_ms, 1),
            "json_bytes": len(first.content),
            "page_bytes": len(page.content),
        }
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compute bench feed", description=__doc__)
    parser.add_argument("--miners", type=int, default=256)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--round-minutes", type=float, default=72.0, help="360 blocks of 12 s (default 72)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.miners < 1 or args.days <= 0 or args.round_minutes <= 0:
        print("--miners, --days and --round-minutes must be positive", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-feed-") as tmp:
        path = Path(tmp) / "validator.db"
        rows = fill_store(path, args.miners, args.days, args.round_minutes, weights_minutes=24 * 60)
        figures: dict[str, object] = {"miners": args.miners, "days": args.days, "pog_rows": rows}
        figures |= measure(path, args.miners, args.repeats)
    figures |= {"target_ms": TARGET_MS, "ok": float(figures["rebuild_json_ms"]) <= TARGET_MS}  # type: ignore[arg-type]
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"machine feed, {args.miners} miners x {args.days:g} days ({rows} PoG rows): first JSON "
            f"{figures['first_json_ms']} ms, rebuild after a round {figures['rebuild_json_ms']} ms "
            f"(target <= {TARGET_MS:.0f} ms), cached {figures['cached_json_ms']} ms, "
            f"page {figures['first_page_ms']} ms, {figures['json_bytes']} bytes"
        )
    return 0 if figures["ok"] else 1


__all__ = ["main"]
