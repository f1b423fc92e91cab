"""Cluster allocate benchmark: N leases reachable by SSH and by their peers, against one lease.

``python -m compute bench cluster-allocate [--nodes N] [--iterations K] [--json]`` starts N real
miner apps, each in its own process (embedded backend, signed transport, a simulated chain,
throw-away wallets, a validator store proving each one's fp16 TFLOPS) on 127.0.0.1 and times, with the renter's own code
(``compute.operator``):

- *one lease*: ``Operator.allocate`` -> an SSH login (pinned host key, the lease's key) works ->
  a command runs in it (the peer check below, with no peer to reach: the same process started);
- *cluster*: ``allocate_cluster`` (all or none) -> a login works on every node -> in that login,
  every node opened a TCP connection to every other node's SSH port from inside its lease (bash's
  ``/dev/tcp``). Rank 0's ``MASTER_PORT`` is not tried: nothing listens there until a job does.

So both figures end with one command run on each lease (``bench allocation``'s "allocate ->
working SSH" runs ``echo ok`` the same way); the cluster's extra is its N allocations and the peer
connections. ``single_login_s`` keeps the login alone (no command) for comparison.

Each is released after it is timed. The figure is the ratio of the medians (issue 39: <= 2).

``--docker-overlay`` (2 nodes, root: a second Docker engine): the same with Docker members joined
by the renter's WireGuard overlay (``allocate --nodes 2 --overlay``): miner 0 rents on this
machine's engine with its tenant firewall (``--miner.overlay_cidrs`` the second engine's range),
miner 1 on a second dockerd in its own network namespace (``scripts/second_dockerd.sh``), as a
miner on another host. One lease is a Docker lease of miner 0; the cluster's time includes making
the overlay and every pair's handshake, and each node's peer check opens its peers' SSH port at
their overlay address (``10.77.0.x:22``: through the overlay only). Then ``overlay_mbps``: 128 MiB
sent over TCP from rank 0 to rank 1 inside the overlay, timed by the receiver (userspace WireGuard
on this machine's cores). What it deliberately does not do: a GPU, or any existing wallet.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from compute.lab.bench.allocation import FAKE_GPU, _wallet

NETUID = 27
IMAGE = "compute-base:cpu"
RATE_PAUSE_S = 2.5  # a miner answers a hotkey 10 requests a second (burst 20): start each step rested
# one TCP stream inside the overlay: the receiver times first byte to end (argv: its overlay address)
RECEIVE = (
    "import socket, sys, time\n"
    "server = socket.create_server((sys.argv[1], 29501))\n"
    "conn, _ = server.accept()\n"
    "count, first = 0, None\n"
    "while chunk := conn.recv(1 << 20):\n"
    "    first = first or time.perf_counter()\n"
    "    count += len(chunk)\n"
    "print(count, time.perf_counter() - first)\n"
)
SEND = (
    "import socket, sys, time\n"
    "for _ in range(300):\n"
    "    try:\n"
    "        conn = socket.create_connection((sys.argv[1], 29501), timeout=5)\n"
    "        break\n"
    "    except OSError:\n"
    "        time.sleep(0.05)\n"
    "block = bytes(1 << 20)\n"
    "for _ in range(128):\n"
    "    conn.sendall(block)\n"
    "conn.close()\n"
)
# every peer's SSH port opened from inside the lease with bash's /dev/tcp (no interpreter to start)
PEER_CHECK = 'for a in "$@"; do exec 3<>"/dev/tcp/${a%:*}/${a##*:}" || exit 1; exec 3>&-; done'


def _specs(backend: str = "embedded") -> Any:
    from compute import __version__
    from compute.protocol import MachineSpecs

    specs = MachineSpecs(
        cpu_model="bench cpu", cpu_cores=4, cpu_freq_mhz=2000.0, ram_bytes=16 << 30,
        disk_total_bytes=200 * 10**9, disk_free_bytes=100 * 10**9, gpus=[FAKE_GPU], backend=backend,
        miner_version=__version__,
    )  # fmt: skip
    return lambda: specs


def _backend(where: Path, index: int, far: dict[str, Any] | None) -> Any:
    """Embedded (``far`` None), else Docker: miner 0 on this engine, miner 1 on the far one."""
    from compute.allocation import EmbeddedBackend

    base = 42000 + 100 * index
    if far is None:
        return EmbeddedBackend(
            where, ssh_host="127.0.0.1", bind_host="127.0.0.1", port_range=(base, base + 99)
        )
    from compute.allocation.docker.backend import DockerBackend
    from compute.allocation.hosts.backend import host_backend
    from compute.allocation.hosts.config import parse_hosts

    miner_id = f"bench-overlay-{index}"
    if index == 0:
        return DockerBackend(
            image=IMAGE,
            host="127.0.0.1",
            ssh_port_range=(base, base + 99),
            name_prefix=miner_id,
            miner_id=miner_id,
            overlay_cidrs=(far["range"],),
        )
    (config,) = parse_hosts({"hosts": [dict(far["entry"], ssh_port_range=f"{base}-{base + 99}")]})
    return host_backend(config, miner_id, IMAGE)


def _serve_miner(
    root: str, index: int, chain_path: str, ready: Any, stop: Any, far: dict[str, Any] | None = None
) -> None:
    """One miner in its own process (its own interpreter and GIL, as a miner on its own machine)."""
    from compute.allocation import AllocationManager, LeaseStore
    from compute.chain import connect
    from compute.miner import build_miner_app
    from compute.transport import AccessPolicy, load_wallet, serve_in_thread

    where = Path(root) / f"miner{index}"
    wallet = load_wallet(f"miner{index}", "default", str(Path(root) / "wallets"))
    chain = connect(f"sim:{chain_path}", NETUID)
    policy = AccessPolicy(chain.metagraph, min_stake=100.0, require_permit=True, refresh_s=60.0)
    backend = _backend(where, index, far)
    manager = AllocationManager(LeaseStore(where / "leases.db"), backend, gpus=[FAKE_GPU])
    server = serve_in_thread(
        build_miner_app(wallet.hotkey, policy, manager, _specs(backend.name)), "127.0.0.1", 0
    )
    ready.put(server.port)
    stop.wait()
    server.stop()
    chain.close()


def _start(root: Path, nodes: int, far: dict[str, Any] | None = None) -> tuple[Any, list[Any], Any, Path]:
    """A simulated chain, ``nodes`` miners serving from their own processes, a renter wallet and a
    validator store; returns (renter wallet, processes, stop event, store path)."""
    import multiprocessing

    from compute.chain import SimChainState, connect
    from compute.store import PogResult, ValidatorStore

    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    chain_path = root / "chain.db"
    state = SimChainState.create(chain_path, netuid=NETUID, block_time=1.0)
    renter = _wallet(root / "wallets", "renter")
    state.register(renter.hotkey.ss58_address, renter.coldkeypub.ss58_address, 1000.0, True)
    chain = connect(f"sim:{chain_path}", NETUID)
    store = ValidatorStore(root / "validator.db")
    round_id = store.begin_round(1).round_id
    processes = []
    try:
        for index in range(nodes):
            wallet = _wallet(root / "wallets", f"miner{index}")
            uid = state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 0.0)
            ready = spawn.Queue()
            process = spawn.Process(
                target=_serve_miner, args=(str(root), index, str(chain_path), ready, stop, far), daemon=True
            )
            process.start()
            processes.append(process)
            chain.serve(wallet, "127.0.0.1", ready.get(timeout=120))
            store.record_result(
                PogResult(
                    round_id, uid, wallet.hotkey.ss58_address, ok=True, sample=1.0, models=(FAKE_GPU.name,),
                    gpu_count=1, tflops_fp16=250.0 - index, created=time.time(),
                )
            )  # fmt: skip
    finally:
        chain.close()
    store.finish_round(round_id, [])
    store.close()
    return renter, processes, stop, root / "validator.db"


async def _measure(
    root: Path, renter: Any, pog_db: Path, nodes: int, iterations: int, overlay: bool = False
) -> dict[str, Any]:
    from compute.operator import (
        LeaseAccess,
        LeaseBook,
        LeaseShell,
        Operator,
        SshUnreachable,
        Wanted,
        load_verified,
        metagraph_reader,
    )
    from compute.operator.cluster import ClusterWanted, allocate_cluster, release_cluster
    from compute.operator.overlay import overlay_address
    from compute.transport import MinerClient

    async with MinerClient(renter, timeout=20, max_concurrency=32) as client:
        op = Operator(
            hotkey=renter.hotkey.ss58_address,
            client=client,
            metagraph=metagraph_reader(f"sim:{root / 'chain.db'}", NETUID),
            book=LeaseBook(root / "register" / "leases.db"),
            data_dir=root / "register",
            network="sim",
            netuid=NETUID,
            verified=load_verified(str(pog_db)),
        )

        async def login(entry: Any) -> Any:
            """An SSH connection to the lease, retried every 50 ms while it does not answer yet."""
            for _ in range(1200):
                try:
                    return await LeaseShell.open(LeaseAccess.of(entry))
                except SshUnreachable:
                    await asyncio.sleep(0.05)
            raise RuntimeError(f"lease {entry.lease_id} never accepted SSH")

        async def reach(entry: Any, peers: list[str], started: float) -> tuple[float, float]:
            """A login on the lease, then the peer check in it: (seconds to the login, seconds to the
            peers reached), from ``started``."""
            async with await login(entry) as shell:
                logged_in = time.perf_counter() - started
                line = " ".join(shlex.quote(a) for a in ("bash", "-c", PEER_CHECK, "peers", *peers))
                result = await shell.run(line, timeout=30)
            if result.exit_status != 0:
                raise RuntimeError(
                    f"lease {entry.lease_id} could not reach its peers: {result.stderr.strip()}"
                )
            return logged_in, time.perf_counter() - started

        def peers_of(cluster: Any, rank: int) -> list[str]:
            if overlay:  # their sshd at their overlay address: reachable through the overlay only
                return [f"{overlay_address(i)}:22" for i in range(len(cluster.members)) if i != rank]
            return [f"{m.ssh_host}:{m.ssh_port}" for i, m in enumerate(cluster.members) if i != rank]

        async def throughput(cluster: Any) -> float:
            """MB/s of one TCP stream from rank 0 to rank 1 inside the overlay, on the receiver's clock."""
            receiver_shell = await login(cluster.members[1])
            sender_shell = await login(cluster.members[0])
            async with receiver_shell, sender_shell:
                receiving = asyncio.ensure_future(
                    receiver_shell.run(f"python3 -c {shlex.quote(RECEIVE)} {overlay_address(1)}", timeout=120)
                )
                sent = await sender_shell.run(
                    f"python3 -c {shlex.quote(SEND)} {overlay_address(1)}", timeout=120
                )
                received = await receiving
            if sent.exit_status != 0 or received.exit_status != 0:
                raise RuntimeError(
                    f"overlay transfer failed: {sent.stderr.strip()} {received.stderr.strip()}"
                )
            count, seconds = received.stdout.split()
            return int(count) / float(seconds) / 1e6

        single: list[float] = []
        single_login: list[float] = []
        phases: list[tuple[float, float, float]] = []  # allocated, every login works, peers reached
        mbps: float | None = None
        for iteration in range(iterations):
            await asyncio.sleep(RATE_PAUSE_S)
            started = time.perf_counter()
            allocation = await op.allocate(Wanted(), 1800)
            logged_in, ran = await reach(allocation.entry, [], started)
            single_login.append(logged_in)
            single.append(ran)
            await op.deallocate(allocation.entry.lease_id)
            await asyncio.sleep(RATE_PAUSE_S)
            started = time.perf_counter()
            cluster = await allocate_cluster(
                op, ClusterWanted(nodes=nodes, wanted=Wanted(overlay=overlay)), 1800
            )
            allocated = time.perf_counter() - started
            reached = await asyncio.gather(
                *(reach(cluster.members[rank], peers_of(cluster, rank), started) for rank in range(nodes))
            )
            phases.append((allocated, max(r[0] for r in reached), max(r[1] for r in reached)))
            if overlay and iteration == iterations - 1:
                mbps = await throughput(cluster)
            await release_cluster(op, cluster)
    one, one_login = statistics.median(single), statistics.median(single_login)
    ssh, whole = statistics.median(p[1] for p in phases), statistics.median(p[2] for p in phases)
    return {
        "nodes": nodes,
        "backend": "docker, overlay" if overlay else "embedded",
        "overlay_mbps": None if mbps is None else round(mbps, 1),
        "iterations": iterations,
        "single_allocate_to_ssh_s": [round(s, 3) for s in single],
        "single_login_s": [round(s, 3) for s in single_login],
        "cluster_allocated_s": [round(p[0], 3) for p in phases],
        "cluster_every_ssh_s": [round(p[1], 3) for p in phases],
        "cluster_every_peer_s": [round(p[2], 3) for p in phases],
        "single_median_s": round(one, 3),
        "single_login_median_s": round(one_login, 3),
        "cluster_ssh_median_s": round(ssh, 3),
        "cluster_median_s": round(whole, 3),
        "ratio_ssh": round(ssh / one_login, 2),  # a login on every node vs a login on one
        "ratio": round(whole / one, 2),  # every node ran its peer check vs one lease ran the same command
        "ratio_vs_login": round(whole / one_login, 2),  # the same against the login alone (stricter)
        "target_ratio": 2.0,
    }


def _far_engine(root: Path, stack: contextlib.ExitStack, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """A second dockerd in its own namespace (taken down when ``stack`` closes), as a hosts entry."""
    from compute.allocation.docker.second_engine import SecondEngine, skip_reason

    reason = skip_reason()
    if reason:
        parser.error(f"--docker-overlay: {reason}")
    engine = SecondEngine(
        root / "engine2", net=29
    )  # 10.203.29-30: apart from the tests' and bench allocation's
    stack.callback(engine.down)
    env = engine.up(IMAGE)
    return {"entry": engine.hosts_entry("far", "42100-42199"), "range": f"{env['ADDRESS']}/30"}


def _remove_leases(far: dict[str, Any]) -> None:
    """Leases a failed run left on either engine (a finished run released them)."""
    import docker

    from compute.allocation.hosts.check import docker_client
    from compute.allocation.hosts.config import parse_hosts

    (config,) = parse_hosts({"hosts": [far["entry"]]})
    for client in (docker.from_env(), docker_client(config)):
        for container in client.containers.list(all=True, filters={"label": "compute.managed=1"}):
            if container.labels.get("compute.miner", "").startswith("bench-overlay-"):
                container.remove(force=True)
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compute bench cluster-allocate", description=__doc__)
    parser.add_argument("--nodes", type=int, default=2, help="nodes per cluster (default 2)")
    parser.add_argument("--iterations", type=int, default=5, help="timed rounds of each (default 5)")
    parser.add_argument(
        "--docker-overlay",
        action="store_true",
        help="Docker members on two engines joined by the renter's overlay (2 nodes; root, a second dockerd)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    if not 2 <= args.nodes <= 16 or not 1 <= args.iterations <= 100:
        parser.error("--nodes must be 2-16 and --iterations 1-100")
    if args.docker_overlay and args.nodes != 2:
        parser.error("--docker-overlay runs 2 nodes (this engine and a second one)")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        far = _far_engine(root, stack, parser) if args.docker_overlay else None
        renter, processes, stop, pog_db = _start(root, args.nodes, far)
        try:
            result = asyncio.run(
                _measure(root, renter, pog_db, args.nodes, args.iterations, overlay=args.docker_overlay)
            )
        finally:
            stop.set()
            for process in processes:
                process.join(30)
            if far is not None:
                _remove_leases(far)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{args.nodes} nodes, medians of {args.iterations}: one lease allocate -> SSH login "
            f"{result['single_login_median_s']:.3f} s, -> a command ran {result['single_median_s']:.3f} s; "
            f"cluster allocate -> a login on every node {result['cluster_ssh_median_s']:.3f} s (ratio "
            f"{result['ratio_ssh']:.2f}), -> every node ran its peer check {result['cluster_median_s']:.3f} s "
            f"(ratio {result['ratio']:.2f}, {result['ratio_vs_login']:.2f} against the login alone; target <= 2)"
            + (
                f"; one TCP stream inside the overlay {result['overlay_mbps']:.0f} MB/s"
                if result["overlay_mbps"]
                else ""
            )
        )
    return 0
