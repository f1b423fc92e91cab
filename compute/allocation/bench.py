"""Allocation benchmark: request -> working SSH session, and sustained allocations per minute.

``python -m compute bench-allocation [--backend embedded|docker] [--iterations N] [--json]``
starts a real miner app (signed transport, access policy over a static metagraph, manager,
backend) on 127.0.0.1 with throw-away wallets, then loops allocate -> SSH ``echo ok`` ->
deallocate, timing each step and checking that file descriptors, threads and (docker)
containers do not grow over the second half of the run (the first half warms connection pools). Prints a table (rich) or JSON.

What it deliberately does not do: touch a chain, a GPU, or any existing wallet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncssh
import psutil

from compute.allocation import BACKENDS, AllocationManager, LeaseStore
from compute.protocol import AllocateRequest, DeallocateRequest, GpuSpec, MachineSpecs, Requirements

FAKE_GPU = GpuSpec(index=0, name="bench GPU", memory_bytes=1 << 34, uuid=None)


def _wallet(root: Path, name: str) -> Any:
    import bittensor as bt

    wallet = bt.Wallet(name=name, hotkey="default", path=str(root))
    wallet.create_new_coldkey(use_password=False, suppress=True, overwrite=True)
    wallet.create_new_hotkey(suppress=True, overwrite=True)
    return wallet


def _snapshot(wallets: list[Any]) -> Any:
    from compute.chain import MetagraphSnapshot, NeuronInfo

    neurons = tuple(
        NeuronInfo(uid, w.hotkey.ss58_address, w.coldkeypub.ss58_address, 1e6, True, None, True, 0)
        for uid, w in enumerate(wallets)
    )
    return MetagraphSnapshot(0, 1, neurons)


def _backend(name: str, root: Path, ports: tuple[int, int], miner_id: str) -> Any:
    if name == "embedded":
        return BACKENDS["embedded"](root, bind_host="127.0.0.1", port_range=ports)
    return BACKENDS["docker"](host="127.0.0.1", ssh_port_range=ports, miner_id=miner_id)


async def _ssh_ok(ssh: Any, key: asyncssh.SSHKey) -> None:
    pinned: tuple[list[asyncssh.SSHKey], list, list] = ([asyncssh.import_public_key(ssh.host_key)], [], [])
    async with asyncssh.connect(
        ssh.host,
        ssh.port,
        username=ssh.username,
        client_keys=[key],
        known_hosts=pinned,
        agent_path=None,
        config=None,
        connect_timeout=30,
    ) as conn:
        result = await conn.run("echo ok", timeout=30)
        if result.stdout != "ok\n":
            raise RuntimeError(f"unexpected SSH output {result.stdout!r}")


def _resources(backend_name: str, miner_id: str) -> dict[str, int]:
    proc = psutil.Process()
    out = {"fds": proc.num_fds(), "threads": proc.num_threads()}
    if backend_name == "docker":
        import docker

        client = docker.from_env()
        out["containers"] = len(
            client.containers.list(all=True, filters={"label": f"compute.miner={miner_id}"})
        )
        client.close()
    return out


async def run_bench(backend_name: str, iterations: int, ports: tuple[int, int]) -> dict[str, Any]:
    from compute.miner import build_miner_app
    from compute.transport import AccessPolicy, KeyWallet, MinerClient, ServerLimits, serve_in_thread

    with tempfile.TemporaryDirectory(prefix="bench-alloc-") as tmp:
        root = Path(tmp)
        miner_w, caller_w = _wallet(root / "w", "miner"), _wallet(root / "w", "caller")
        snapshot = _snapshot([miner_w, caller_w])
        miner_id = miner_w.hotkey.ss58_address  # the bench's own containers only, as a real miner
        backend = _backend(backend_name, root / "data", ports, miner_id)
        gpus = [FAKE_GPU] if backend_name == "embedded" else []  # docker would need a real GPU runtime
        manager = AllocationManager(LeaseStore(root / "leases.db"), backend, gpus)
        specs = MachineSpecs(
            cpu_model="bench",
            cpu_cores=1,
            cpu_freq_mhz=0,
            ram_bytes=0,
            disk_total_bytes=0,
            disk_free_bytes=0,
            backend=backend_name,
            miner_version="bench",
        )
        keypair = KeyWallet.from_wallet(miner_w)
        app = build_miner_app(
            keypair,
            AccessPolicy(lambda: snapshot),
            manager,
            lambda: specs,
            ServerLimits(rate_per_s=1000, burst=1000),
        )
        server = serve_in_thread(app, "127.0.0.1", 0)
        endpoint = f"127.0.0.1:{server.port}"
        key = asyncssh.generate_private_key("ssh-ed25519")
        public = key.export_public_key("openssh").decode().strip()
        request = AllocateRequest(
            requirements=Requirements(gpu_count=len(gpus)), duration_s=600, ssh_public_key=public
        )
        to_response, to_ssh, to_release = [], [], []
        try:
            async with MinerClient(caller_w, timeout=120) as client:
                warm = (await client.call(endpoint, keypair.ss58, request)).lease  # warm-up, not counted
                await _ssh_ok(warm.ssh, key)
                await client.call(endpoint, keypair.ss58, DeallocateRequest(lease_id=warm.lease_id))
                before = _resources(backend_name, miner_id)
                started = time.perf_counter()
                for index in range(iterations):
                    if index == iterations // 2:
                        middle = _resources(backend_name, miner_id)  # pools (HTTP, docker) are warm by now
                    t0 = time.perf_counter()
                    lease = (await client.call(endpoint, keypair.ss58, request)).lease
                    t1 = time.perf_counter()
                    await _ssh_ok(lease.ssh, key)
                    t2 = time.perf_counter()
                    await client.call(endpoint, keypair.ss58, DeallocateRequest(lease_id=lease.lease_id))
                    to_response.append(t1 - t0)
                    to_ssh.append(t2 - t0)
                    to_release.append(time.perf_counter() - t2)
                elapsed = time.perf_counter() - started
                after = _resources(backend_name, miner_id)
        finally:
            server.stop()
    return {
        "backend": backend_name,
        "iterations": iterations,
        "allocate_response_s": _summary(to_response),
        "allocate_to_ssh_s": _summary(to_ssh),
        "deallocate_s": _summary(to_release),
        "cycles_per_minute": round(iterations / elapsed * 60, 1),
        "resources_before": before,
        "resources_middle": middle,
        "resources_after": after,
        "leak": any(after[k] > middle[k] + 2 for k in middle),
    }


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 4),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4),
        "max": round(ordered[-1], 4),
    }


def _table(results: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="allocation benchmark (127.0.0.1, signed transport, pinned SSH)")
    for column in (
        "backend",
        "n",
        "allocate resp. median/p95 s",
        "alloc->ssh median/p95 s",
        "dealloc median s",
        "cycles/min",
        "fds/threads before->after",
        "leak",
    ):
        table.add_column(column)
    for r in results:
        b, a = r["resources_before"], r["resources_after"]
        table.add_row(
            r["backend"],
            str(r["iterations"]),
            f"{r['allocate_response_s']['median']:.3f} / {r['allocate_response_s']['p95']:.3f}",
            f"{r['allocate_to_ssh_s']['median']:.3f} / {r['allocate_to_ssh_s']['p95']:.3f}",
            f"{r['deallocate_s']['median']:.3f}",
            f"{r['cycles_per_minute']:.0f}",
            f"{b['fds']}/{b['threads']} -> {a['fds']}/{a['threads']}",
            "YES" if r["leak"] else "no",
        )
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compute bench-allocation", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--backend", choices=["embedded", "docker", "both"], default="embedded")
    parser.add_argument("--iterations", type=int, default=20, help="measured cycles (>= 2)")
    parser.add_argument("--ports", default="44000-44099", help="port range for lease listeners")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    low, high = (int(p) for p in args.ports.split("-"))
    names = ["embedded", "docker"] if args.backend == "both" else [args.backend]
    results = []
    for name in names:
        if name == "docker":
            from compute.specs import collect_docker

            docker = collect_docker()
            if not docker.available:
                parser.exit(1, f"docker backend skipped: {docker.error}\n")
        results.append(asyncio.run(run_bench(name, max(2, args.iterations), (low, high))))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _table(results)
    return 1 if any(r["leak"] for r in results) else 0


__all__ = ["main", "run_bench"]
