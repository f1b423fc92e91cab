"""Benchmark of the signed transport: the same app with btauth/1 + response signing on vs off.

``python -m compute bench transport [--json]`` (or ``python -m compute.lab.bench.transport``) starts
one server process holding two apps, identical except for ``insecure_disable_auth``, and measures
from this process:

- latency: sequential round trips, alternating signed/unsigned so background load hits both
  alike; p50 and p95 in milliseconds;
- throughput: ``--total`` requests at ``--concurrency`` in flight, requests/s (best of two
  alternating rounds per mode).

The signed path includes request signing, verification, the access-policy check against a static
metagraph, rate limiting, admission and response signing/verification. The figures depend on the
host and on whatever else runs on it; the load average is reported with them.

What it deliberately does not do: test correctness (tests/transport does), or use real wallets
on disk (dev keypairs derived from fixed URIs stand in; signing cost is the same).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MINER_URI = "//ComputeBenchMiner"
VALIDATOR_URI = "//ComputeBenchValidator"


class BenchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lease_id: str = Field(max_length=64)
    seconds: int = Field(ge=0, le=10**9)


class BenchResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lease_id: str
    expires_at: float
    caller: str


@dataclass(frozen=True)
class ModeResult:
    mode: str
    p50_ms: float
    p95_ms: float
    requests_per_s: float
    server_cpu_ms: float  # server process CPU per request during the throughput rounds
    client_cpu_ms: float  # this process's CPU per request (sign, send, verify, parse)
    errors: int


def _build_app(auth: bool) -> Any:
    from bittensor.sp_core import Keypair

    from compute.chain import MetagraphSnapshot, NeuronInfo
    from compute.transport.policy import AccessPolicy
    from compute.transport.server import ServerLimits, SignedServer

    miner = Keypair.create_from_uri(MINER_URI)
    validator = Keypair.create_from_uri(VALIDATOR_URI)
    snap = MetagraphSnapshot(
        27,
        1,
        (
            NeuronInfo(0, miner.ss58_address, miner.ss58_address, 0.0, False, None, True, 0),
            NeuronInfo(1, validator.ss58_address, validator.ss58_address, 10_000.0, True, None, True, 0),
        ),
    )
    policy = AccessPolicy(lambda: snap, min_stake=1000.0, require_permit=True)
    limits = ServerLimits(rate_per_s=1e6, burst=1e6, max_concurrency=256)
    server = SignedServer(miner, policy, limits, insecure_disable_auth=not auth)

    @server.route("/v1/bench", BenchRequest, BenchResponse)
    async def handle(req: BenchRequest, caller: Any) -> BenchResponse:
        return BenchResponse(
            lease_id=req.lease_id, expires_at=time.time() + req.seconds, caller=caller.hotkey_ss58
        )

    return server.app


def _server_main(conn: Any) -> None:
    """Child process: run the signed and the unsigned app, report ports, wait for 'stop'."""
    from compute.transport.server import serve_in_thread

    signed = serve_in_thread(_build_app(auth=True))
    plain = serve_in_thread(_build_app(auth=False))
    conn.send({"signed": signed.port, "plain": plain.port})
    while conn.recv() == "cpu":
        conn.send(time.process_time())
    signed.stop()
    plain.stop()


async def _latencies(
    clients: dict[str, Any], ports: dict[str, int], miner: str, n: int
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {mode: [] for mode in clients}
    body = BenchRequest(lease_id="0" * 32, seconds=3600)
    for i in range(n + 20):
        for mode, client in clients.items():
            started = time.perf_counter()
            await client.request(f"127.0.0.1:{ports[mode]}", miner, "/v1/bench", body, BenchResponse)
            if i >= 20:  # warm-up
                out[mode].append((time.perf_counter() - started) * 1e3)
    return out


def _server_cpu(conn: Any) -> float:
    conn.send("cpu")
    return float(conn.recv())


async def _throughput(client: Any, port: int, miner: str, total: int, concurrency: int) -> tuple[float, int]:
    body = BenchRequest(lease_id="0" * 32, seconds=3600)
    sem = asyncio.Semaphore(concurrency)

    async def one() -> bool:
        async with sem:
            try:
                await client.request(f"127.0.0.1:{port}", miner, "/v1/bench", body, BenchResponse)
                return True
            except Exception:
                return False

    started = time.perf_counter()
    ok = await asyncio.gather(*[one() for _ in range(total)])
    elapsed = time.perf_counter() - started
    return total / elapsed, ok.count(False)


def _client_main(conn: Any) -> None:
    """Load-generator process: for each (mode, port, n, concurrency) job, send n requests."""
    from bittensor.sp_core import Keypair

    from compute.transport.auth import KeyWallet
    from compute.transport.client import MinerClient

    miner = Keypair.create_from_uri(MINER_URI).ss58_address
    wallet = KeyWallet(Keypair.create_from_uri(VALIDATOR_URI))

    async def serve() -> None:
        clients = {
            "signed": MinerClient(wallet, max_concurrency=256),
            "plain": MinerClient(wallet, max_concurrency=256, insecure_no_auth=True),
        }
        try:
            conn.send("ready")
            while (job := conn.recv()) is not None:
                mode, port, n, concurrency = job
                cpu = time.process_time()
                _, failed = await _throughput(clients[mode], port, miner, n, concurrency)
                conn.send((failed, time.process_time() - cpu))
        finally:
            for client in clients.values():
                await client.aclose()

    asyncio.run(serve())


def _fan_out(
    pipes: list[Any], mode: str, port: int, total: int, concurrency: int
) -> tuple[float, int, float]:
    """One throughput round spread over the client processes: (requests/s, errors, client CPU s)."""
    share, per_conc = total // len(pipes), max(1, concurrency // len(pipes))
    started = time.perf_counter()
    for pipe in pipes:
        pipe.send((mode, port, share, per_conc))
    answers = [pipe.recv() for pipe in pipes]
    elapsed = time.perf_counter() - started
    return share * len(pipes) / elapsed, sum(a[0] for a in answers), sum(a[1] for a in answers)


async def _measure(
    conn: Any, ports: dict[str, int], sequential: int, total: int, concurrency: int, pipes: list[Any]
) -> list[ModeResult]:
    from bittensor.sp_core import Keypair

    from compute.transport.auth import KeyWallet
    from compute.transport.client import MinerClient

    miner = Keypair.create_from_uri(MINER_URI).ss58_address
    wallet = KeyWallet(Keypair.create_from_uri(VALIDATOR_URI))
    clients = {
        "signed": MinerClient(wallet, max_concurrency=concurrency),
        "plain": MinerClient(wallet, max_concurrency=concurrency, insecure_no_auth=True),
    }
    try:
        lat = await _latencies(clients, ports, miner, sequential)
        rps: dict[str, list[float]] = {m: [] for m in clients}
        errors = dict.fromkeys(clients, 0)
        server_cpu = dict.fromkeys(clients, 0.0)
        client_cpu = dict.fromkeys(clients, 0.0)
        for _ in range(2):
            for mode in clients:
                s0 = _server_cpu(conn)
                if pipes:
                    rate, failed, cpu = await asyncio.to_thread(
                        _fan_out, pipes, mode, ports[mode], total, concurrency
                    )
                else:
                    c0 = time.process_time()
                    rate, failed = await _throughput(clients[mode], ports[mode], miner, total, concurrency)
                    cpu = time.process_time() - c0
                server_cpu[mode] += _server_cpu(conn) - s0
                client_cpu[mode] += cpu
                rps[mode].append(rate)
                errors[mode] += failed
    finally:
        for client in clients.values():
            await client.aclose()
    return [
        ModeResult(
            mode=mode,
            p50_ms=round(statistics.median(lat[mode]), 3),
            p95_ms=round(statistics.quantiles(lat[mode], n=20)[18], 3),
            requests_per_s=round(max(rps[mode]), 1),
            server_cpu_ms=round(server_cpu[mode] / (2 * total) * 1e3, 3),
            client_cpu_ms=round(client_cpu[mode] / (2 * total) * 1e3, 3),
            errors=errors[mode],
        )
        for mode in ("plain", "signed")
    ]


def run(sequential: int = 300, total: int = 2000, concurrency: int = 8, clients: int = 2) -> dict[str, Any]:
    """Run the benchmark and return the figures as a dict (what ``--json`` prints).

    Throughput is driven from ``clients`` load-generator processes (0 = from this process), as a
    miner is loaded by many validators: one Python client process tops out near 1/client-CPU.
    """
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_server_main, args=(child,), daemon=True)
    proc.start()
    loaders: list[Any] = []
    pipes: list[Any] = []
    try:
        for _ in range(clients):
            mine, theirs = ctx.Pipe()
            loader = ctx.Process(target=_client_main, args=(theirs,), daemon=True)
            loader.start()
            loaders.append(loader)
            pipes.append(mine)
        if not parent.poll(60):
            raise RuntimeError("benchmark server did not start within 60 s")
        ports = parent.recv()
        for pipe in pipes:
            if not pipe.poll(60) or pipe.recv() != "ready":
                raise RuntimeError("benchmark client process did not start within 60 s")
        results = asyncio.run(_measure(parent, ports, sequential, total, concurrency, pipes))
    finally:
        for pipe in pipes:
            pipe.send(None)
        for loader in loaders:
            loader.join(15)
            if loader.is_alive():
                loader.kill()
        parent.send("stop")
        proc.join(15)
        if proc.is_alive():
            proc.kill()
    plain, signed = results
    return {
        "results": [asdict(r) for r in results],
        "p50_ratio": round(signed.p50_ms / plain.p50_ms, 3),
        # what one server core could sustain if the load generator were elsewhere
        "signed_server_capacity_rps": round(1e3 / signed.server_cpu_ms) if signed.server_cpu_ms else None,
        "targets": {"p50_ratio_max": 1.5, "signed_rps_min": 500},
        "sequential": sequential,
        "total": total,
        "concurrency": concurrency,
        "clients": clients,
        "cpus": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def _print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"compute.transport: signed vs unsigned (concurrency {report['concurrency']}, "
        f"{report['clients'] or 1} client process(es))"
    )
    columns = ("mode", "p50 ms", "p95 ms", "requests/s", "server CPU ms/req", "client CPU ms/req", "errors")
    for column in columns:
        table.add_column(column, justify="right" if column != "mode" else "left")
    for r in report["results"]:
        table.add_row(
            r["mode"],
            f"{r['p50_ms']:.2f}",
            f"{r['p95_ms']:.2f}",
            f"{r['requests_per_s']:.0f}",
            f"{r['server_cpu_ms']:.3f}",
            f"{r['client_cpu_ms']:.3f}",
            str(r["errors"]),
        )
    console = Console()
    console.print(table)
    console.print(
        f"signed/plain p50 = {report['p50_ratio']:.2f} (target <= 1.5); signed server capacity "
        f"~{report['signed_server_capacity_rps']} req/s per core; "
        f"cpus={report['cpus']} load(1m)={report['loadavg_1m']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compute bench transport", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sequential", type=int, default=300, help="round trips per mode for latency")
    parser.add_argument("--total", type=int, default=2000, help="requests per throughput round")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="requests in flight during throughput rounds"
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=2,
        help="load-generator processes for throughput (0 = this process; default 2)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if min(args.sequential, args.total, args.concurrency) < 1 or args.clients < 0:
        parser.error("--sequential, --total and --concurrency must be >= 1, --clients >= 0")
    report = run(args.sequential, args.total, args.concurrency, args.clients)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        _print_table(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
