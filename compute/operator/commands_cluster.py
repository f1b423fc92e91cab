"""``register.py allocate --nodes N``, ``cluster run|show|check`` and ``deallocate --cluster``.

- ``allocate --nodes N [--gpus-per-node G] [--max-spread S] [--min-link-gbps X]`` rents N machines
  of similar proven throughput all or none (``compute.operator.cluster``) and prints each node's
  lease, SSH command and rendezvous variables. Ctrl-C or SIGTERM releases whatever was made. With
  ``--min-link-gbps`` the renter proves the nodes' link once they are rented and keeps the cluster
  only at that figure or more (``cluster_check.allocate_linked_cluster``).
- ``cluster run CLUSTER -- COMMAND...`` runs the command on every node at once over the pinned SSH
  path, with the node's variables exported, each output line prefixed ``[rank N]``; it exits with
  the lowest rank's non-zero status (0 when every rank ends with 0).
- ``cluster show CLUSTER`` prints the nodes and their variables again.
- ``cluster check CLUSTER [--mib N]`` proves the nodes' link with the renter as the judge
  (``compute.operator.cluster_check``): exit 0 when it passed, 1 when it failed.
- ``deallocate --cluster CLUSTER`` ends every member lease.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import IO, Any

from rich.console import Console

from compute.argv import bounded, count, non_negative, positive
from compute.operator.cluster import (
    DEFAULT_MAX_SPREAD,
    MAX_NODES,
    Cluster,
    ClusterWanted,
    allocate_cluster,
    load_cluster,
    rejoin_overlay,
    release_cluster,
)
from compute.operator.cluster_check import CheckOptions, allocate_linked_cluster, check_cluster
from compute.operator.commands import Result, parse_duration, report_undone, wanted_from
from compute.operator.errors import Refused, UsageError
from compute.operator.output import link_json, link_line
from compute.operator.service import Operator
from compute.operator.shell import LeaseAccess, LeaseShell

CLUSTER_HELP = "cluster id (or a unique prefix of one in your book; `last`: your newest active cluster)"


def add_cluster_flags(allocate: argparse.ArgumentParser) -> None:
    group = allocate.add_argument_group("cluster (docs/cluster.md#cluster-rentals)")
    group.add_argument(
        "--nodes",
        type=bounded(2, MAX_NODES, int),
        help=f"rent this many machines (2-{MAX_NODES}) of similar proven throughput, all or none",
    )
    group.add_argument("--gpus-per-node", type=count, help="with --nodes: GPUs on each node (as --gpu-count)")
    group.add_argument(
        "--max-spread",
        type=bounded(0, 0.99),
        help="with --nodes: the slowest node's proven fp16 TFLOPS per GPU at least (1 - this) x the "
        f"fastest's (default {DEFAULT_MAX_SPREAD:g})",
    )
    group.add_argument(
        "--overlay",
        action="store_true",
        default=None,
        help="with --nodes: Docker members joined by your own WireGuard overlay (each lease gets a TUN "
        "device and a UDP port; the job binds wg0); all or none, as the cluster",
    )
    group.add_argument(
        "--min-link-gbps",
        type=non_negative,
        help="with --nodes: after renting, prove the nodes' link yourself (as `cluster check`) and keep the "
        "cluster only at this many Gbit/s per link or more; else every lease is released",
    )
    group.add_argument(
        "--link-mib", type=positive, help="with --min-link-gbps: the proof's vector, MiB (default 64)"
    )
    group.add_argument(
        "--link-python", help="with --min-link-gbps: the interpreter in each lease (default python3)"
    )
    group.add_argument(
        "--link-ifname", help="with --min-link-gbps: the network interface the collective uses"
    )


def add_cluster_commands(sub, shared: Callable[[argparse.ArgumentParser], None]) -> None:  # noqa: ANN001
    """``cluster run|show``: ``sub`` is compute.operator.cli's parser factory, ``shared`` adds the
    global flags to a nested command."""
    cluster = sub("cluster", "run a command on every node of a cluster, or show its nodes")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)

    def nested(name: str, text: str) -> argparse.ArgumentParser:
        child = actions.add_parser(name, help=text, description=text)
        shared(child)
        child.add_argument("cluster", help=CLUSTER_HELP)
        return child

    run = nested("run", "run a command on every node at once, each line prefixed [rank N]")
    run.add_argument(
        "remote_command", nargs="+", metavar="COMMAND", help="the command for every node, after --"
    )
    run.add_argument("--timeout", type=positive, help="end every node's command after this many seconds")
    nested("show", "a cluster's nodes, each one's rendezvous variables and your latest link proof")
    join = nested(
        "join",
        "join an overlay cluster's members again, with fresh keys (after a member's lease restarted: "
        "its interface went with its container)",
    )
    join.add_argument("--timeout", type=positive, help="seconds for every pair's handshake (default 30)")
    check = nested(
        "check",
        "prove the cluster's link yourself: a timed, verified all-reduce across every node, on your clock "
        "(kept in your book: cluster show, list)",
    )
    check.add_argument("--mib", type=positive, default=64.0, help="the all-reduced vector, MiB (default 64)")
    check.add_argument(
        "--python",
        default="python3",
        help="the interpreter in each lease (torch and this package importable)",
    )
    check.add_argument("--ifname", help="the network interface the collective uses on every node (e.g. eth0)")
    check.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="NCCL on cuda, gloo on cpu (default auto)",
    )
    check.add_argument(
        "--timeout", type=positive, help="seconds for the nodes to join, and for the proof (default 120)"
    )


def check_cluster_args(args: argparse.Namespace) -> None:
    """Flags of ``allocate --nodes`` and ``deallocate --cluster`` that do not go together."""
    command = getattr(args, "command", None)
    if command == "allocate":
        for gate, needs, flags in (
            ("nodes", "--nodes N", ("gpus_per_node", "max_spread", "min_link_gbps", "overlay")),
            ("min_link_gbps", "--min-link-gbps X", ("link_mib", "link_python", "link_ifname")),
        ):
            given = [name for name in flags if getattr(args, name) is not None]
            if given and getattr(args, gate) is None:
                raise UsageError(f"--{given[0].replace('_', '-')} needs {needs}")
        if args.nodes is not None:
            for flag, value in (("--uid", args.uid), ("--hotkey", args.hotkey), ("--volume", args.volume)):
                if value is not None:
                    raise UsageError(f"--nodes picks the machines; {flag} names one (leave one out)")
            if args.ssh_key:
                raise UsageError("--nodes makes one key pair per node; leave --ssh-key out")
            if args.gpus_per_node is not None and args.gpu_count not in (None, args.gpus_per_node):
                raise UsageError("give --gpus-per-node or --gpu-count, not both")
    elif command == "deallocate":
        if (args.lease is None) == (args.cluster is None):
            raise UsageError("deallocate needs a lease id or --cluster ID (one of them)")


def cluster_wanted(args: argparse.Namespace) -> ClusterWanted:
    wanted = wanted_from(args)
    if args.gpus_per_node is not None:
        wanted = replace(wanted, gpu_count=args.gpus_per_node)
    if args.overlay:
        wanted = replace(wanted, overlay=True)
    return ClusterWanted(
        nodes=args.nodes,
        wanted=wanted,
        max_spread=DEFAULT_MAX_SPREAD if args.max_spread is None else args.max_spread,
        min_link_gbps=args.min_link_gbps,
    )


def cluster_json(op: Operator, cluster: Cluster) -> dict[str, Any]:
    return {
        "cluster_id": cluster.cluster_id,
        "state": cluster.state,
        "link": link_json(op.book.last_link(cluster.cluster_id)),
        "overlay": cluster.overlay,
        "master_addr": cluster.master_addr,
        "master_port": cluster.rendezvous_port,
        "gpus_per_node": cluster.gpus_per_node,
        "nodes": [
            {
                "rank": rank,
                "lease_id": entry.lease_id,
                "miner_uid": entry.miner_uid,
                "state": entry.state,
                "ssh_host": entry.ssh_host,
                "ssh_port": entry.ssh_port,
                "ssh_username": entry.ssh_username,
                "private_key_file": entry.private_key_path,
                "ssh_command": op.ssh_command(entry),
                "env": cluster.env(rank),
            }
            for rank, entry in enumerate(cluster.members)
        ],
    }


def _render(payload: dict[str, Any], title: str) -> Any:
    def render(console: Console) -> None:
        console.print(
            f"{title} {payload['cluster_id']}: {len(payload['nodes'])} nodes, "
            f"MASTER_ADDR={payload['master_addr']} MASTER_PORT={payload['master_port']}"
            + (" (inside the overlay, interface wg0)" if payload["overlay"] else ""),
            highlight=False,
            markup=False,
        )
        for node in payload["nodes"]:
            env = " ".join(f"{k}={v}" for k, v in node["env"].items())
            console.print(
                f"  rank {node['rank']}  lease {node['lease_id']}  {env}", highlight=False, markup=False
            )
            if node["ssh_command"]:
                console.print(f"    {node['ssh_command']}", highlight=False, markup=False)
        console.print(f"  {link_line(payload['link'], payload['cluster_id'])}", highlight=False, markup=False)

    return render


async def cmd_allocate_cluster(op: Operator, args: argparse.Namespace) -> Result:
    want = cluster_wanted(args)
    duration = parse_duration(args.hours, args.duration, ttl=args.ttl, until=args.until)
    report = None
    try:
        if want.min_link_gbps is None:
            cluster = await allocate_cluster(op, want, duration)
        else:
            options = CheckOptions(
                mib=args.link_mib or CheckOptions.mib,
                python=args.link_python or CheckOptions.python,
                ifname=args.link_ifname,
            )
            cluster, report = await allocate_linked_cluster(op, want, duration, options)
    except asyncio.CancelledError:  # Ctrl-C or SIGTERM: every lease made for it is released first
        report_undone(op, args)
        raise
    payload: dict[str, Any] = {"cluster": cluster_json(op, cluster)}
    if report is not None:  # its figure is the cluster's link, printed by the render below
        payload["link"] = report.payload(cluster)
    return Result(payload, _render(payload["cluster"], "Cluster allocated"))


async def cmd_deallocate_cluster(op: Operator, args: argparse.Namespace) -> Result:
    cluster = load_cluster(op, args.cluster)
    released = await release_cluster(op, cluster)
    problems = {s.lease_id or "": s.problem for s in released if s.problem}
    payload: dict[str, Any] = {
        "cluster_id": cluster.cluster_id,
        "released": [s.lease_id for s in released if not s.problem],
        "problems": problems,
    }
    text = f"Cluster {cluster.cluster_id}: {len(payload['released'])} lease(s) released."
    if problems:
        text += " Not released: " + "; ".join(f"{k}: {v}" for k, v in problems.items())
    return Result(
        payload, lambda console: console.print(text, highlight=False, markup=False), 1 if problems else 0
    )


async def cmd_cluster(op: Operator, args: argparse.Namespace) -> Result:
    cluster = load_cluster(op, args.cluster)
    if args.action == "show":
        shown = cluster_json(op, cluster)
        return Result({"cluster": shown}, _render(shown, "Cluster"))
    ended = [m.lease_id for m in cluster.members if m.state != "active"]
    if ended:
        raise Refused(f"cluster {cluster.cluster_id}: lease(s) {', '.join(ended)} ended; rent a new cluster")
    if args.action == "check":
        return await cmd_cluster_check(op, cluster, args)
    if args.action == "join":
        joined = await rejoin_overlay(op, cluster, args.timeout)
        shown = cluster_json(op, joined)
        return Result({"cluster": shown}, _render(shown, "Overlay joined again: cluster"))
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout:g}")
    command = args.remote_command[0] if len(args.remote_command) == 1 else shlex.join(args.remote_command)
    out = getattr(args, "out_stream", None) or sys.stdout
    err = getattr(args, "err_stream", None) or sys.stderr
    statuses = await run_on_cluster(cluster, command, out, err, args.timeout)
    failed = [s for s in statuses if s != 0]
    code = failed[0] if failed else 0
    payload: dict[str, Any] = {
        "cluster_id": cluster.cluster_id,
        "exit_statuses": statuses,
        "exit_status": code,
    }
    return Result(payload, exit_code=code)


async def cmd_cluster_check(op: Operator, cluster: Cluster, args: argparse.Namespace) -> Result:
    options = CheckOptions(
        mib=args.mib,
        python=args.python,
        ifname=args.ifname,
        device=args.device,
        timeout_s=args.timeout or CheckOptions.timeout_s,
    )
    report = await check_cluster(cluster, options, op.book)
    payload = report.payload(cluster)

    def render(console: Console) -> None:
        head = f"Cluster {payload['cluster_id']}: {payload['nodes']} nodes, "
        if payload["passed"]:
            plain = f"; a plain all-reduce {payload['plain_gbs']:g} GB/s" if payload["plain_gbs"] else ""
            text = (
                f"{head}link proven at {payload['bandwidth_gbs']:g} GB/s per link "
                f"({payload['vector_bytes'] / 1024**2:g} MiB in {payload['interval_s']:g} s on your clock{plain})"
            )
        else:
            text = f"{head}the proof failed: " + "; ".join(payload["failures"][:4])
        console.print(text, highlight=False, markup=False)

    return Result(payload, render, 0 if payload["passed"] else 1)


class RankLines:
    """Bytes of one rank's stream, written out line by line as ``[rank N] line``."""

    def __init__(self, rank: int, stream: IO[str]) -> None:
        self._prefix, self._stream, self._partial = f"[rank {rank}] ", stream, b""

    def write(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self._emit(line)

    def close(self) -> None:
        if self._partial:
            self._emit(self._partial)
            self._partial = b""

    def _emit(self, line: bytes) -> None:
        self._stream.write(self._prefix + line.decode("utf-8", errors="replace") + "\n")
        self._stream.flush()


async def run_on_cluster(
    cluster: Cluster, command: str, out: IO[str], err: IO[str], timeout: float | None = None
) -> list[int]:
    """Run ``command`` on every node at once with its rendezvous variables; each rank's status."""

    async def one(rank: int, entry: Any) -> int:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in cluster.env(rank).items())
        sinks = RankLines(rank, out), RankLines(rank, err)
        async with await LeaseShell.open(LeaseAccess.of(entry)) as shell:
            try:
                result = await shell.run(
                    f"export {exports}; {command}", timeout=timeout, stdout=sinks[0], stderr=sinks[1]
                )
            finally:
                sinks[0].close()
                sinks[1].close()
        return result.exit_status

    return list(await asyncio.gather(*(one(r, e) for r, e in enumerate(cluster.members))))
