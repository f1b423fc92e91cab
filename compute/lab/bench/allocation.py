"""Allocation benchmark: request -> working SSH session, and sustained allocations per minute.

``python -m compute bench allocation [--backend embedded|embedded-sandboxed|docker] [--iterations N] [--json]``
starts a real miner app (signed transport, access policy over a static metagraph, manager,
backend) on 127.0.0.1 with throw-away wallets, then loops allocate -> SSH ``echo ok`` ->
deallocate, timing each step and checking that file descriptors, threads and (docker)
containers do not grow over the second half of the run (the first half warms connection pools). Prints a table (rich) or JSON.
``embedded-sandboxed`` (root) is the embedded backend as miners run it off the local demo: every
lease command through the sandbox launcher (``compute.allocation.embedded.sandbox``).

Several hosts: ``--hosts_file FILE`` measures each host of a multi-host miner in turn (one result
per host, ``backend`` ``docker:<host>``), and ``--second_dockerd`` (root) starts a second engine
in a network namespace over mutual TLS (``scripts/second_dockerd.sh``) and measures allocate->SSH
on it next to this machine's engine, in the same run.

What it deliberately does not do: touch a chain, a GPU, or any existing wallet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncssh
import psutil

from compute.allocation import BACKENDS, AllocationManager, LeaseStore
from compute.allocation.docker.second_engine import IMAGE, SecondEngine, skip_reason
from compute.allocation.hosts.backend import MultiHostBackend, host_backend
from compute.allocation.hosts.config import HostConfig, HostsFileError, load_hosts, parse_hosts
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
    if name == "embedded-sandboxed":
        from compute.allocation.embedded.sandbox import SandboxPaths

        hidden = SandboxPaths.for_miner(root.parent / "w", root)  # the bench's wallets and data
        return BACKENDS["embedded"](root, bind_host="127.0.0.1", port_range=ports, sandbox=hidden)
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


def _resources(backend: Any, miner_id: str) -> dict[str, int]:
    proc = psutil.Process()
    out = {"fds": proc.num_fds(), "threads": proc.num_threads()}
    engines = (
        [state.backend._client() for state in backend.hosts.values()] if hasattr(backend, "hosts") else []
    )
    if backend.name == "docker" and not engines:
        import docker

        engines = [docker.from_env()]
    if engines:
        label = {"label": f"compute.miner={miner_id}"}
        out["containers"] = sum(len(engine.containers.list(all=True, filters=label)) for engine in engines)
    return out


def _multihost(hosts: tuple[HostConfig, ...], store: LeaseStore, miner_id: str) -> MultiHostBackend:
    def host_of(lease_id: str) -> str | None:
        lease = store.get(lease_id)
        return None if lease is None else lease.record.host

    return MultiHostBackend(
        hosts, host_of, lambda c: host_backend(c, miner_id, IMAGE, None, "127.0.0.1"), IMAGE
    )


async def _measure(
    client: Any,
    endpoint: str,
    miner: str,
    request: AllocateRequest,
    key: asyncssh.SSHKey,
    iterations: int,
    probe: Any,
) -> dict[str, Any]:
    """Warm up once, then ``iterations`` timed allocate -> SSH -> deallocate cycles."""
    warm = (await client.call(endpoint, miner, request)).lease  # warm-up, not counted
    await _ssh_ok(warm.ssh, key)
    await client.call(endpoint, miner, DeallocateRequest(lease_id=warm.lease_id))
    to_response, to_ssh, to_release = [], [], []
    before = middle = probe()
    started = time.perf_counter()
    for index in range(iterations):
        if index == iterations // 2:
            middle = probe()  # pools (HTTP, docker) are warm by now
        t0 = time.perf_counter()
        lease = (await client.call(endpoint, miner, request)).lease
        t1 = time.perf_counter()
        await _ssh_ok(lease.ssh, key)
        t2 = time.perf_counter()
        await client.call(endpoint, miner, DeallocateRequest(lease_id=lease.lease_id))
        to_response.append(t1 - t0)
        to_ssh.append(t2 - t0)
        to_release.append(time.perf_counter() - t2)
    elapsed = time.perf_counter() - started
    after = probe()
    return {
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


async def run_bench(
    backend_name: str, iterations: int, ports: tuple[int, int], hosts: tuple[HostConfig, ...] | None = None
) -> list[dict[str, Any]]:
    """One result per target: the backend, or (``hosts``) each host of a multi-host miner in turn."""
    from compute.miner import build_miner_app
    from compute.transport import AccessPolicy, KeyWallet, MinerClient, ServerLimits, serve_in_thread

    with tempfile.TemporaryDirectory(prefix="bench-alloc-") as tmp:
        root = Path(tmp)
        miner_w, caller_w = _wallet(root / "w", "miner"), _wallet(root / "w", "caller")
        snapshot = _snapshot([miner_w, caller_w])
        miner_id = miner_w.hotkey.ss58_address  # the bench's own containers only, as a real miner
        store = LeaseStore(root / "leases.db")
        multi: MultiHostBackend | None = None
        targets: list[str | None] = [None]
        if hosts:
            multi = _multihost(hosts, store, miner_id)
            await multi.check_hosts()
            if multi.down_report():
                raise RuntimeError(f"hosts down: {multi.down_report()}")
            targets = list(multi.hosts)
        backend = multi or _backend(backend_name, root / "data", ports, miner_id)
        embedded = backend_name.startswith("embedded")
        gpus = [FAKE_GPU] if embedded else []  # docker would need a real GPU runtime
        manager = AllocationManager(store, backend, gpus, placement=multi)
        specs = MachineSpecs(
            cpu_model="bench",
            cpu_cores=1,
            cpu_freq_mhz=0,
            ram_bytes=0,
            disk_total_bytes=0,
            disk_free_bytes=0,
            backend=backend_name.split("-")[0],
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
        results = []
        try:
            async with MinerClient(caller_w, timeout=120) as client:
                for target in targets:
                    request = AllocateRequest(
                        requirements=Requirements(gpu_count=len(gpus), host=target),
                        duration_s=600,
                        ssh_public_key=public,
                    )
                    result = await _measure(
                        client,
                        endpoint,
                        keypair.ss58,
                        request,
                        key,
                        iterations,
                        lambda: _resources(backend, miner_id),
                    )
                    label = backend_name if target is None else f"{backend_name}:{target}"
                    results.append({"backend": label, **({"host": target} if target else {}), **result})
        finally:
            server.stop()
            if multi is not None:
                await multi.close()
            store.close()
    return results


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

    table = Table(title="allocation benchmark (signed transport on 127.0.0.1, pinned SSH)")
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


def _hosts(
    args: argparse.Namespace, low: int, high: int, engine: SecondEngine | None
) -> tuple[HostConfig, ...]:
    """The hosts to measure: ``--hosts_file``, or this engine next to a second one (``--second_dockerd``)."""
    if args.hosts_file:
        return load_hosts(args.hosts_file)
    assert engine is not None
    middle = (low + high) // 2
    local = {
        "name": "local",
        "endpoint": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
        "ssh_host": "127.0.0.1",
        "ssh_port_range": f"{low}-{middle}",
        "isolate": False,
    }
    return parse_hosts({"hosts": [local, engine.hosts_entry("remote", f"{middle + 1}-{high}")]})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compute bench allocation", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--backend", choices=["embedded", "embedded-sandboxed", "docker", "both"], default="embedded"
    )
    parser.add_argument("--iterations", type=int, default=20, help="measured cycles (>= 2)")
    parser.add_argument("--ports", default="44000-44099", help="port range for lease listeners")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--hosts_file", help="measure each host of this hosts file (multi-host miner)")
    parser.add_argument(
        "--second_dockerd",
        action="store_true",
        help="root: start a second engine in a network namespace (TLS) and measure it next to the local one",
    )
    args = parser.parse_args(argv)
    low, high = (int(p) for p in args.ports.split("-"))
    names = ["embedded", "docker"] if args.backend == "both" else [args.backend]
    if args.hosts_file or args.second_dockerd:
        names = ["docker"]
    results: list[dict[str, Any]] = []
    for name in names:
        if name == "embedded-sandboxed":
            from compute.allocation.embedded.sandbox import available

            if not available():
                parser.exit(1, "embedded-sandboxed: the lease sandbox needs root on Linux\n")
        if name == "docker":
            from compute.specs import collect_docker

            docker = collect_docker()
            if not docker.available and not args.hosts_file:
                parser.exit(1, f"docker backend skipped: {docker.error}\n")
        if name == "docker" and (args.hosts_file or args.second_dockerd):
            results.extend(_run_hosts(parser, args, low, high))
            continue
        results.extend(asyncio.run(run_bench(name, max(2, args.iterations), (low, high))))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _table(results)
    return 1 if any(r["leak"] for r in results) else 0


def _run_hosts(
    parser: argparse.ArgumentParser, args: argparse.Namespace, low: int, high: int
) -> list[dict[str, Any]]:
    engine = None
    if args.second_dockerd:
        reason = skip_reason()
        if reason:
            parser.exit(1, f"--second_dockerd: {reason}\n")
        engine = SecondEngine(Path(tempfile.mkdtemp(prefix="bench-engine2-")) / "d", net=20)
    try:
        if engine is not None:
            engine.up()
        hosts = _hosts(args, low, high, engine)
        return asyncio.run(run_bench("docker", max(2, args.iterations), (low, high), hosts))
    except (HostsFileError, RuntimeError) as exc:
        parser.exit(1, f"bench-allocation: {exc}\n")
    finally:
        if engine is not None:
            engine.down()
            engine.directory.parent.rmdir()  # the temp dir made for it (down removed its content)


__all__ = ["main", "run_bench"]
