"""``python -m compute bench hardening [--json]``: the miner's hardening figures, measured.

- flood: a signed server in its own process, a slow-body flood of ``--connections`` from each of
  ``--addresses`` loopback addresses (127.0.0.2 on) in another, and signed calls from 127.0.0.1
  meanwhile: answered share and p95 (target 100 %, <= 1 s; ``--addresses 40 --connections 100``
  is the 4,000-connection flood of tests/miner/test_fd_flood.py);
- crash loop: ``kill -9`` at every step of allocate and release, ``--iterations`` times each, then a
  restart: ghost leases, orphans, failed restarts (target 0 / 0 / 0);
- volumes (Docker, root): ``kill -9`` after each step of creating and removing a hard volume,
  ``--iterations``/10 times each, then a restart: volumes listed but unusable, strays, failed
  restarts (target 0 / 0 / 0);
- isolation (Docker, root): a lease container probes another tenant's SSH, the host gateway and a
  private address on a network this command creates: open paths (target 0).

Everything targets 127.0.0.1 or containers and networks it creates. Figures depend on the host and
its load; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
MINER_URI, VALIDATOR_URI = "//HardeningMiner", "//HardeningValidator"


def _server_main(conn: Any) -> None:
    from bittensor.sp_core import Keypair

    from compute.protocol import HealthRequest, HealthResponse
    from compute.transport import ServerLimits, SignedServer, raise_nofile_limit, serve_in_thread

    raise_nofile_limit()  # as the miner does at start; the caps are sized against it
    server = SignedServer(Keypair.create_from_uri(MINER_URI), None, ServerLimits(rate_per_s=1000, burst=1000))

    @server.route("/v1/health", HealthRequest, HealthResponse)
    async def health(req: HealthRequest, caller: Any) -> HealthResponse:
        return HealthResponse(
            version="bench", hotkey=server.hotkey, backend="none", uptime_s=0, active_leases=0, free_gpus=0
        )

    running = serve_in_thread(server.app)
    conn.send(running.port)
    conn.recv()
    conn.send(dict(server.guard.refusals.totals))
    running.stop()


async def _flood(connections: int, calls: int, addresses: int = 1) -> dict[str, Any]:
    from bittensor.sp_core import Keypair

    from compute.lab.harness.flood import flood_process, loopback_sources, p95, signed_latencies
    from compute.protocol import HealthRequest
    from compute.transport import KeyWallet, MinerClient

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_server_main, args=(child,), daemon=True)
    server.start()
    port = parent.recv()
    miner = Keypair.create_from_uri(MINER_URI).ss58_address
    async with MinerClient(KeyWallet(Keypair.create_from_uri(VALIDATOR_URI)), timeout=5) as client:

        async def call() -> object:
            return await client.call(f"127.0.0.1:{port}", miner, HealthRequest())

        await call()
        sources = loopback_sources(addresses)
        flood = flood_process(
            port, sources=sources, connections=connections, mode="slow-body", seconds=calls * 0.5 + 30
        )
        await asyncio.sleep(3.0)
        answered, failed = await signed_latencies(call, calls, interval_s=0.1)
        flood.kill()
    parent.send("stop")
    refused = parent.recv()
    server.join(10)
    return {
        "flood_connections": connections * addresses,
        "flood_addresses": addresses,
        "signed_calls": calls,
        "answered_pct": round(100.0 * len(answered) / calls, 1),
        "p95_s": round(p95(answered), 3),
        "refused_by_server": refused,
    }


def _crash(iterations: int, backend: str) -> dict[str, Any]:
    from compute.lab.harness.crashloop import STEPS, run_crash_loop

    with tempfile.TemporaryDirectory(prefix="crashloop-") as tmp:
        report = run_crash_loop(Path(tmp), iterations, backend)
    return {"backend": backend, "steps": list(STEPS), **report.__dict__}


def _volumes(iterations: int) -> dict[str, Any]:
    from compute.lab.harness.volcrash import STEPS, run_volume_crash_loop

    try:
        with tempfile.TemporaryDirectory(prefix="volcrash-") as tmp:
            report = run_volume_crash_loop(Path(tmp), iterations)
    except Exception as exc:  # no engine, no image, not root: say so instead of failing the bench
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    return {"steps": list(STEPS), **report.__dict__}


def _isolation() -> dict[str, Any]:
    from compute.lab.harness.isolation_probe import probe_paths

    try:
        paths = asyncio.run(probe_paths())
    except Exception as exc:  # no engine, no image, not root: say so instead of failing the bench
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    return {"paths": paths, "open_paths": sum(v == "open" for v in paths.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compute bench hardening", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--connections", type=int, default=200, help="slow-body connections per flood address (200)"
    )
    parser.add_argument("--addresses", type=int, default=1, help="flood source addresses, 127.0.0.2 on (1)")
    parser.add_argument("--calls", type=int, default=40, help="signed calls during the flood (40)")
    parser.add_argument("--iterations", type=int, default=20, help="kills per step in the crash loop (20)")
    parser.add_argument(
        "--backend", choices=["embedded", "docker"], default="embedded", help="crash-loop backend"
    )
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["flood", "crash", "volumes", "isolation"],
        help="parts to skip",
    )
    args = parser.parse_args(argv)
    started = time.time()
    result: dict[str, Any] = {"load_average": [round(x, 2) for x in os.getloadavg()]}
    if "flood" not in args.skip:
        result["flood"] = asyncio.run(_flood(args.connections, args.calls, args.addresses))
    if "crash" not in args.skip:
        result["crash_loop"] = _crash(args.iterations, args.backend)
    if "volumes" not in args.skip:
        result["volume_crash_loop"] = _volumes(max(1, args.iterations // 10))
    if "isolation" not in args.skip:
        result["isolation"] = _isolation()
    result["took_s"] = round(time.time() - started, 1)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        for part, value in result.items():
            sys.stdout.write(f"{part}: {value}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
