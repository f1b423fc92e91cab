"""Benchmark: one validator round against N miners on loopback (``python -m compute bench validator``).

A child process hosts N miner apps (signed API + embedded backend) on one event loop; a simulated
chain lists them; this process runs one real ``RoundLoop`` step over them and prints the wall time
and the validator's CPU seconds per miner (``time.process_time`` of this process only: signing,
HTTP, SSH, digest, verification, store; the miners' and workers' compute runs in other
processes). Bench-only: the miners' lease environment (the backend's ``extra_env``) hides torch
so that N workers' imports do not dominate the wall time (the CPU prover then uses numpy; the
validator's work is unchanged).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import socket
import sys
import tempfile
import time
from pathlib import Path

from bittensor.sp_core import Keypair

log = logging.getLogger(__name__)
NETUID = 27


def _listening_socket() -> socket.socket:
    """A socket bound to a free loopback port and listening: handed to uvicorn as it is, so no
    other process can take the port between choosing it and serving on it (the old race)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    return sock


async def _serve_miners(count: int, root: Path) -> None:
    """Child: run ``count`` miners, print their endpoints as one JSON line, exit on stdin EOF."""
    from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
    from compute.miner import build_miner_app
    from compute.miner.specs import fixed_specs
    from compute.transport import KeyWallet, ServerLimits, serve

    stub = root / "no-torch"
    (stub / "torch").mkdir(parents=True, exist_ok=True)
    (stub / "torch" / "__init__.py").write_text("raise ImportError('torch hidden by the benchmark')\n")

    specs = fixed_specs([], cpu_model="bench", cpu_cores=1, miner_version="bench")
    stop, tasks, listed = asyncio.Event(), [], []
    for i in range(count):
        keypair = Keypair.create_from_uri(f"//BenchMiner{i}")
        base = 46000 + i * 4
        backend = EmbeddedBackend(
            root / f"m{i}",
            bind_host="127.0.0.1",
            port_range=(base, base + 3),
            extra_env={"PYTHONPATH": str(stub)},
        )
        manager = AllocationManager(
            LeaseStore(root / f"m{i}" / "leases.db"),
            backend,
            [],
            ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10),
        )
        app = build_miner_app(
            KeyWallet(keypair), None, manager, lambda: specs, ServerLimits(rate_per_s=1000, burst=1000)
        )
        sock = _listening_socket()
        port = sock.getsockname()[1]
        tasks.append(asyncio.create_task(serve(app, "127.0.0.1", port, stop, sock=sock)))
        listed.append({"hotkey": keypair.ss58_address, "port": port})
    await asyncio.sleep(1.0)
    print(json.dumps(listed), flush=True)
    await asyncio.to_thread(sys.stdin.read)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _round(args: argparse.Namespace, root: Path, miners: list[dict]) -> dict:
    from compute.chain import SimChainState, connect
    from compute.chain.sim.records import AxonUpdate
    from compute.scoring import ScoringConfig, load_gpu_table
    from compute.store import ValidatorStore
    from compute.transport import KeyWallet, MinerClient
    from compute.validator.context import ValidatorContext
    from compute.validator.fleet.oversight import Oversight
    from compute.validator.params import RoundParams
    from compute.validator.rentals.canary import CanaryTiming
    from compute.validator.round.loop import RoundLoop

    validator = Keypair.create_from_uri("//BenchValidator")
    state = SimChainState.create(root / "chain.db", netuid=NETUID, block_time=1.0)
    state.register(validator.ss58_address, validator.ss58_address, 10_000.0, True)
    loopback = int(ipaddress.IPv4Address("127.0.0.1"))
    for miner in miners:
        state.register(miner["hotkey"], miner["hotkey"], 1.0, False)
        state.serve_axon(NETUID, miner["hotkey"], AxonUpdate(loopback, miner["port"], 4, 4, 1))
    chain = connect(f"sim:{root / 'chain.db'}", NETUID)
    store = ValidatorStore(root / "validator.db")
    client = MinerClient(KeyWallet(validator), timeout=60, max_concurrency=256)
    params = RoundParams(
        round_id=0,
        block=0,
        miner_timeout=args.miner_timeout,
        retries=0,
        pog_m=args.m,
        pog_n=args.n,
        pog_p=args.p,
        device="cpu",
        lease_seconds=120,
    )
    oversight = Oversight(
        canary_rate=args.canary_rate,
        canary_timing=CanaryTiming.for_dwell(1.0),
        canary_dir=root / "canary",
    )
    ctx = ValidatorContext(
        chain,
        store,
        client,
        validator.ss58_address,
        params,
        load_gpu_table(),
        ScoringConfig(),
        oversight=oversight,
        allow_same_ip=True,
    )
    loop = RoundLoop(
        ctx, interval_blocks=1, concurrency=args.concurrency, step_timeout=1800, show_table=False
    )
    block = chain.block()
    cpu0, wall0 = time.process_time(), time.monotonic()
    await loop.run_step(block)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    results = store.results(1)
    await client.aclose()
    store.close()
    chain.close()
    return {
        "miners": len(miners),
        "verified": sum(r.ok for r in results),
        "wall_s": round(wall, 2),
        "validator_cpu_s": round(cpu, 2),
        "cpu_s_per_miner": round(cpu / max(1, len(miners)), 4),
        "concurrency": args.concurrency,
        "canary_rate": args.canary_rate,
        "canaries": oversight.ledger.canaries_tried(),
        "m": args.m,
        "n": args.n,
        "p": args.p,
        "failures": sorted({r.reasons[0] for r in results if not r.ok})[:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compute bench validator", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--miners", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--p", type=int, default=64)
    parser.add_argument("--miner-timeout", type=float, default=300.0)
    parser.add_argument(
        "--canary-rate", type=float, default=0.1, help="chance per miner of a canary rental (default 0.1)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--serve-miners", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.serve_miners:
        asyncio.run(_serve_miners(args.serve_miners, Path(args.dir)))
        return 0
    import subprocess

    with tempfile.TemporaryDirectory(prefix="bench-validator-") as tmp:
        root = Path(tmp)
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "compute.lab.bench.validator",
                "--serve-miners",
                str(args.miners),
                "--dir",
                tmp,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdin is not None  # both are PIPEs
        try:
            line = child.stdout.readline()
            if not line:
                print(
                    f"bench validator: the miners' process exited {child.wait(30)} before serving",
                    file=sys.stderr,
                )
                return 1
            miners = json.loads(line)
            report = asyncio.run(_round(args, root, miners))
        finally:
            child.stdin.close()
            child.wait(30)
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>18}: {value}")
    return 0 if report["verified"] == report["miners"] else 1  # a failed miner is a failed benchmark


if __name__ == "__main__":
    sys.exit(main())
