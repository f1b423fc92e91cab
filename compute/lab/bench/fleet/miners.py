"""The fleet benchmark's miners: N real miner apps in child processes, each with its own leases.

Each miner is the production miner app (signed FastAPI on its own loopback socket, the real
allocation manager and lease store) claiming ``gpus`` H100s, on a ``FleetBackend`` (real SSH,
in-process ``FleetProver``). A process serves a share of the miners (``split``; one process for
2,048 GPUs shares one loop and one GIL, which ``leases`` and ``wire`` keep tens-of-MB openings from
holding); it prints its miners' endpoints as one JSON line, serves until its stdin
closes, then prints what its side saw (``SessionStats``, its own CPU seconds and peak memory) as a
second JSON line (``merge_reports`` joins the processes'). It runs at a lower priority than the
validator (nice), so the figures measure the validator's process, not the simulated miners'.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import sys
import time
from pathlib import Path

from bittensor.sp_core import Keypair

from compute.lab.bench.fleet.device import Device
from compute.lab.bench.fleet.leases import Executors, FleetBackend, SessionStats
from compute.lab.bench.fleet.prover import FleetProver

MINER_NICE = 2
PORTS_PER_MINER = 8  # validation lease + a canary + spares, each its own SSH port


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak resident memory of a process (Linux VmHWM), MB; 0 when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    return sock


def _same(value):
    return value


def miner_keypair(index: int) -> Keypair:
    return Keypair.create_from_uri(f"//FleetMiner{index}")


def merge_reports(reports: list[dict]) -> dict:
    """What the miners' processes saw, as one (sums; the worst lateness; sessions open at once is
    their sum, an upper bound)."""
    merged: dict = {"timed": [], "errors": []}
    for report in reports:
        for key in ("cpu_s", "peak_rss_mb", "ssh_worker_sessions", "ssh_sessions_open_max"):
            merged[key] = merged.get(key, 0) + report.get(key, 0)
        for key in ("pass_late_max_s", "read_late_max_s"):
            merged[key] = max(merged.get(key, 0.0), report.get(key, 0.0))
        merged["timed"] += report.get("timed", [])
        merged["errors"] += report.get("errors", [])
    merged["errors"] = merged["errors"][:20]
    return merged


def split(count: int, processes: int) -> list[range]:
    """Miner indices ``0..count-1`` dealt round-robin to at most ``processes``: the validator tests
    miners in index order, so the ones tested at once land in different processes."""
    processes = max(1, min(processes, count))
    return [range(k, count, processes) for k in range(processes)]


async def serve_miners(indices: range, gpus: int, root: Path, seed: bytes, first_port: int) -> None:
    """Run the miners ``indices`` until stdin closes (see the module docstring)."""
    from compute.allocation import AllocationManager, LeaseStore, ManagerLimits
    from compute.miner import build_miner_app
    from compute.miner.specs import fixed_specs
    from compute.protocol import GpuSpec
    from compute.transport import KeyWallet, ServerLimits, serve

    try:
        os.nice(MINER_NICE)
    except OSError:
        pass
    device, stats = Device(), SessionStats()
    executors = Executors.start()
    stop, tasks, listed = asyncio.Event(), [], []
    for i in indices:
        keypair = miner_keypair(i)
        hotkey = keypair.ss58_address
        gpu_specs = [
            GpuSpec(index=g, name=device.name, memory_bytes=device.memory_bytes, uuid=f"GPU-m{i}-{g:02d}")
            for g in range(gpus)
        ]
        specs = fixed_specs(gpu_specs, cpu_model="fleet", cpu_cores=64, miner_version="fleet")
        base = first_port + i * PORTS_PER_MINER
        backend = FleetBackend(
            root / f"m{i}",
            bind_host="127.0.0.1",
            port_range=(base, base + PORTS_PER_MINER - 1),
            prover=functools.partial(FleetProver, seed, gpus, f"m{i}", device),
            stats=stats,
            executors=executors,
            owner=hotkey,
        )
        manager = AllocationManager(
            LeaseStore(root / f"m{i}" / "leases.db"),
            backend,
            gpu_specs,
            ManagerLimits(max_cpu=64, max_memory_gb=512, max_disk_gb=1000),
        )
        app = build_miner_app(
            KeyWallet(keypair),
            None,
            manager,
            functools.partial(_same, specs),
            ServerLimits(rate_per_s=1000, burst=1000),
        )
        sock = _socket()
        tasks.append(asyncio.create_task(serve(app, "127.0.0.1", sock.getsockname()[1], stop, sock=sock)))
        listed.append({"index": i, "hotkey": hotkey, "port": sock.getsockname()[1]})
    await asyncio.sleep(1.0)
    print(json.dumps(listed), flush=True)
    await asyncio.to_thread(sys.stdin.read)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    executors.shutdown()
    report = {
        "cpu_s": time.process_time(),
        "peak_rss_mb": peak_rss_mb(),
        "ssh_worker_sessions": stats.sessions,
        "ssh_sessions_open_max": stats.open_max,
        "timed": stats.timed,
        "pass_late_max_s": stats.pass_late_max_s,
        "read_late_max_s": stats.read_late_max_s,
        "errors": stats.errors[:20],
    }
    print(json.dumps(report), flush=True)
