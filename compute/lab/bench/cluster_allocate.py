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
What it deliberately does not do: Docker (whose tenant policy blocks lease-to-lease traffic,
docs/cluster.md), a GPU, or any existing wallet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from compute.lab.bench.allocation import FAKE_GPU, _wallet

NETUID = 27
RATE_PAUSE_S = 2.5  # a miner answers a hotkey 10 requests a second (burst 20): start each step rested
# every peer's SSH port opened from inside the lease with bash's /dev/tcp (no interpreter to start)
PEER_CHECK = 'for a in "$@"; do exec 3<>"/dev/tcp/${a%:*}/${a##*:}" || exit 1; exec 3>&-; done'


def _specs() -> Any:
    from compute import __version__
    from compute.protocol import MachineSpecs

    specs = MachineSpecs(
        cpu_model="bench cpu", cpu_cores=4, cpu_freq_mhz=2000.0, ram_bytes=16 << 30,
        disk_total_bytes=200 * 10**9, disk_free_bytes=100 * 10**9, gpus=[FAKE_GPU], backend="embedded",
        miner_version=__version__,
    )  # fmt: skip
    return lambda: specs


def _serve_miner(root: str, index: int, chain_path: str, ready: Any, stop: Any) -> None:
    """One miner in its own process (its own interpreter and GIL, as a miner on its own machine)."""
    from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore
    from compute.chain import connect
    from compute.miner import build_miner_app
    from compute.transport import AccessPolicy, load_wallet, serve_in_thread

    where = Path(root) / f"miner{index}"
    wallet = load_wallet(f"miner{index}", "default", str(Path(root) / "wallets"))
    chain = connect(f"sim:{chain_path}", NETUID)
    policy = AccessPolicy(chain.metagraph, min_stake=100.0, require_permit=True, refresh_s=60.0)
    base = 42000 + 100 * index
    backend = EmbeddedBackend(
        where, ssh_host="127.0.0.1", bind_host="127.0.0.1", port_range=(base, base + 99)
    )
    manager = AllocationManager(LeaseStore(where / "leases.db"), backend, gpus=[FAKE_GPU])
    server = serve_in_thread(build_miner_app(wallet.hotkey, policy, manager, _specs()), "127.0.0.1", 0)
    ready.put(server.port)
    stop.wait()
    server.stop()
    chain.close()


def _start(root: Path, nodes: int) -> tuple[Any, list[Any], Any, Path]:
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
                target=_serve_miner, args=(str(root), index, str(chain_path), ready, stop), daemon=True
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


async def _measure(root: Path, renter: Any, pog_db: Path, nodes: int, iterations: int) -> dict[str, Any]:
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
            return [f"{m.ssh_host}:{m.ssh_port}" for i, m in enumerate(cluster.members) if i != rank]

        single: list[float] = []
        single_login: list[float] = []
        phases: list[tuple[float, float, float]] = []  # allocated, every login works, peers reached
        for _ in range(iterations):
            await asyncio.sleep(RATE_PAUSE_S)
            started = time.perf_counter()
            allocation = await op.allocate(Wanted(), 1800)
            logged_in, ran = await reach(allocation.entry, [], started)
            single_login.append(logged_in)
            single.append(ran)
            await op.deallocate(allocation.entry.lease_id)
            await asyncio.sleep(RATE_PAUSE_S)
            started = time.perf_counter()
            cluster = await allocate_cluster(op, ClusterWanted(nodes=nodes, wanted=Wanted()), 1800)
            allocated = time.perf_counter() - started
            reached = await asyncio.gather(
                *(reach(cluster.members[rank], peers_of(cluster, rank), started) for rank in range(nodes))
            )
            phases.append((allocated, max(r[0] for r in reached), max(r[1] for r in reached)))
            await release_cluster(op, cluster)
    one, one_login = statistics.median(single), statistics.median(single_login)
    ssh, whole = statistics.median(p[1] for p in phases), statistics.median(p[2] for p in phases)
    return {
        "nodes": nodes,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compute bench cluster-allocate", description=__doc__)
    parser.add_argument("--nodes", type=int, default=2, help="nodes per cluster (default 2)")
    parser.add_argument("--iterations", type=int, default=5, help="timed rounds of each (default 5)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    if not 2 <= args.nodes <= 16 or not 1 <= args.iterations <= 100:
        parser.error("--nodes must be 2-16 and --iterations 1-100")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        root = Path(tmp)
        renter, processes, stop, pog_db = _start(root, args.nodes)
        try:
            result = asyncio.run(_measure(root, renter, pog_db, args.nodes, args.iterations))
        finally:
            stop.set()
            for process in processes:
                process.join(30)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{args.nodes} nodes, medians of {args.iterations}: one lease allocate -> SSH login "
            f"{result['single_login_median_s']:.3f} s, -> a command ran {result['single_median_s']:.3f} s; "
            f"cluster allocate -> a login on every node {result['cluster_ssh_median_s']:.3f} s (ratio "
            f"{result['ratio_ssh']:.2f}), -> every node ran its peer check {result['cluster_median_s']:.3f} s "
            f"(ratio {result['ratio']:.2f}, {result['ratio_vs_login']:.2f} against the login alone; target <= 2)"
        )
    return 0
