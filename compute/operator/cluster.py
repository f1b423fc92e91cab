"""Cluster rentals: N machines of similar proven throughput, rented all or none.

``select`` (pure) picks ``nodes`` machines from the ranked candidates whose validator-proven fp16
TFLOPS per GPU lie within ``max_spread`` of each other (the slowest at least ``1 - max_spread``
times the fastest), the fastest such group first. Machines without a proven figure are never
picked: a cluster's pace is its slowest member's, so an unproven one cannot be placed.
``allocate_cluster`` rents every chosen machine at once through ``Operator.allocate`` (each
request's intent in the book before it leaves); if any one fails, or the call is cancelled
(Ctrl-C, SIGTERM), every lease already made is released and every intent settled before the error
goes on. The cluster (an id over its lease ids, in rank order) is then recorded in the lease book.

``Cluster.env(rank)`` is what a distributed job needs on each node: ``MASTER_ADDR`` (rank 0's SSH
host), ``MASTER_PORT`` (an extra port rank 0's lease publishes), ``NODE_RANK``/``RANK``,
``NNODES``/``WORLD_SIZE`` (nodes: ``cluster run`` starts one command per node; torchrun sets the
per-process ones itself) and ``LOCAL_WORLD_SIZE`` (GPUs per node).

With an overlay (``ClusterWanted.overlay``: Docker members, ``allocate --nodes N --overlay``) the
members are joined by the renter's WireGuard overlay once rented (``overlay.join_overlay``; a
failure releases every member like a refusal), and the variables point into it: ``MASTER_ADDR`` is
rank 0's overlay address, ``MASTER_PORT`` 29500 there, ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME``
``wg0`` and ``OVERLAY_ADDR`` the node's own address.

Deliberately not here: a link figure (no miner has a proven one in the feed; ``min_link_gbps`` is
the renter's own proof after renting, ``cluster_check.allocate_linked_cluster``), the overlay's
own steps (``overlay``; what reaches what: docs/cluster.md), and replacing
a member that refuses (the cluster fails whole; ask again).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from compute.operator.book import BookEntry, ClusterRecord
from compute.operator.discovery import Machine, Wanted, rank
from compute.operator.errors import LeaseNotFound, NoMatchingMachine, Refused, UsageError
from compute.operator.overlay import IFNAME, OVERLAY_MASTER_PORT, OverlayFailed, join_overlay, overlay_address
from compute.operator.service import UNDO_GRACE_S, Allocation, Operator, Settled

logger = logging.getLogger(__name__)

DEFAULT_MAX_SPREAD = 0.2
MAX_NODES = 64


@dataclass(frozen=True)
class ClusterWanted:
    """``nodes`` machines, each matching ``wanted`` (its ``gpu_count``: GPUs per node)."""

    nodes: int
    wanted: Wanted
    max_spread: float = DEFAULT_MAX_SPREAD
    min_link_gbps: float | None = None  # Gbit/s per link, proven by the renter after renting

    def __post_init__(self) -> None:
        if not 2 <= self.nodes <= MAX_NODES:
            raise UsageError(f"--nodes must be between 2 and {MAX_NODES}, got {self.nodes}")
        if not 0 <= self.max_spread < 1:
            raise UsageError(f"--max-spread must be in [0, 1), got {self.max_spread:g}")
        if self.wanted.extra_ports < 1:  # rank 0 publishes MASTER_PORT; any member may be rank 0
            object.__setattr__(self, "wanted", replace(self.wanted, extra_ports=1))


def per_gpu_tflops(machine: Machine) -> float | None:
    """The validator-proven fp16 TFLOPS of one of the machine's GPUs (None: not proven)."""
    figure = machine.proof.tflops_fp16 if machine.proof is not None else None
    return figure if figure is not None and figure > 0 else None


def select(machines: Iterable[Machine], want: ClusterWanted) -> list[Machine]:
    """The fastest group of ``want.nodes`` available, matching, proven machines within the spread,
    fastest first (rank 0); ``NoMatchingMachine`` saying why when there is none."""
    machines = list(machines)
    fit = rank(machines, want.wanted)
    proven = [m for m in fit if per_gpu_tflops(m) is not None]
    order = sorted(proven, key=lambda m: -(per_gpu_tflops(m) or 0.0))  # stable: rank() breaks ties
    for start in range(len(order) - want.nodes + 1):
        group = order[start : start + want.nodes]
        fastest, slowest = per_gpu_tflops(group[0]) or 0.0, per_gpu_tflops(group[-1]) or 0.0
        if slowest >= (1 - want.max_spread) * fastest:
            return group
    if len(proven) < want.nodes:
        others = sum(1 for m in machines if m.online and m.backend not in (None, "docker"))
        why = (
            f"; --overlay needs Docker miners, and {others} online machine(s) run another backend"
            if want.wanted.overlay and others
            else ""
        )
        raise NoMatchingMachine(
            f"{want.nodes} nodes asked, {len(proven)} available matching machine(s) with a proven "
            f"throughput ({len(fit) - len(proven)} more without one){why}"
        )
    raise NoMatchingMachine(
        f"no {want.nodes} of the {len(proven)} proven machines lie within a spread of "
        f"{want.max_spread:g} (fp16 TFLOPS per GPU: "
        + ", ".join(f"uid {m.uid} {per_gpu_tflops(m):.4g}" for m in order)
        + "); raise --max-spread"
    )


@dataclass(frozen=True)
class Cluster:
    """Rented machines in rank order (``members[0]`` is rank 0)."""

    cluster_id: str
    members: tuple[BookEntry, ...]
    gpus_per_node: int
    master_port: int | None  # rank 0's published port as its peers reach it
    master_inner_port: int | None  # the same port inside rank 0's lease
    overlay: bool = False  # joined by the renter's WireGuard overlay: the variables point into it

    @property
    def master_addr(self) -> str | None:
        return overlay_address(0) if self.overlay else self.members[0].ssh_host

    @property
    def rendezvous_port(self) -> int | None:
        """``MASTER_PORT`` as rank 0's peers use it (inside the overlay, or rank 0's published one)."""
        return OVERLAY_MASTER_PORT if self.overlay else self.master_port

    @property
    def state(self) -> str:
        """active while any member is; else the first member's end state."""
        states = {m.state for m in self.members}
        return "active" if "active" in states else self.members[0].state

    def env(self, node_rank: int) -> dict[str, str]:
        """The rendezvous variables for the node of ``node_rank``."""
        if not 0 <= node_rank < len(self.members):
            raise UsageError(f"rank {node_rank} is not in a cluster of {len(self.members)} nodes")
        port = self.master_inner_port if node_rank == 0 else self.master_port
        if self.overlay:
            port = OVERLAY_MASTER_PORT
        nodes = str(len(self.members))
        env = {
            "NODE_RANK": str(node_rank),
            "RANK": str(node_rank),
            "NNODES": nodes,
            "WORLD_SIZE": nodes,
            "LOCAL_WORLD_SIZE": str(max(1, self.gpus_per_node)),
            "MASTER_ADDR": self.master_addr or "",
        }
        if port is not None:
            env["MASTER_PORT"] = str(port)
        if self.overlay:
            env.update(
                GLOO_SOCKET_IFNAME=IFNAME, NCCL_SOCKET_IFNAME=IFNAME, OVERLAY_ADDR=overlay_address(node_rank)
            )
        return env


def _master_ports(entry: BookEntry) -> tuple[int | None, int | None]:
    """(outer, inner) of rank 0's first published extra port: the same port where it can be."""
    if not entry.ports:
        return None, None
    same = sorted(p for p, outer in entry.ports.items() if p == outer)
    inner = same[0] if same else min(entry.ports)
    return entry.ports[inner], inner


def cluster_of(record: ClusterRecord, entries: Sequence[BookEntry]) -> Cluster:
    outer, inner = _master_ports(entries[0])
    return Cluster(record.cluster_id, tuple(entries), record.gpus_per_node, outer, inner, record.overlay)


def load_cluster(op: Operator, cluster_id: str) -> Cluster:
    """A cluster of the book by id, a unique prefix of one (4+ hex characters) or ``last``."""
    records = op.book.clusters(op.hotkey)
    text = cluster_id.strip().lower()
    if text == "last":
        found = [r for r in records if _active(op, r)][:1]
        if not found:
            raise LeaseNotFound("you have no active cluster (`last` names your newest one)")
    else:
        found = [r for r in records if r.cluster_id.startswith(text)] if len(text) >= 4 else []
    if not found:
        raise LeaseNotFound(f"no cluster of yours starts with {text[:40]!r} (`list` shows them)")
    if len(found) > 1:
        raise UsageError(f"{text} matches {len(found)} clusters; give more characters")
    record = found[0]
    entries = [op.book.get(lease_id) for lease_id in record.lease_ids]
    if any(e is None for e in entries):
        raise UsageError(f"cluster {record.cluster_id}: a member lease is missing from the book")
    return cluster_of(record, [e for e in entries if e is not None])


def _active(op: Operator, record: ClusterRecord) -> bool:
    return any((e := op.book.get(i)) is not None and e.state == "active" for i in record.lease_ids)


async def allocate_cluster(op: Operator, want: ClusterWanted, duration_s: int) -> Cluster:
    """Rent ``want.nodes`` machines all or none (see the module's docstring); on a cancellation,
    ``op.undone`` says what was released before ``CancelledError`` goes on."""
    chosen = select(await op.resources(want.wanted), want)
    logger.info("cluster of %d: uids %s", want.nodes, [m.uid for m in chosen])
    tasks = [asyncio.ensure_future(op.allocate(want.wanted, duration_s, probed=m)) for m in chosen]
    try:
        allocations = await asyncio.shield(asyncio.gather(*tasks))
    except asyncio.CancelledError:
        op.undone = await _release_made(op, tasks)
        raise
    except Refused as exc:
        released = await _release_made(op, tasks)
        made = sum(1 for s in released if s.lease_id)
        error = copy.copy(exc)  # the same class and code, the cluster's words
        error.message = f"cluster not rented: {exc.message}; {made} lease(s) made for it released"
        error.args = (error.message,)
        raise error from exc
    except BaseException:
        await _release_made(op, tasks)
        raise
    entries = [a.entry for a in allocations]
    record = ClusterRecord(
        cluster_id=secrets.token_hex(8),
        owner_hotkey=op.hotkey,
        lease_ids=tuple(e.lease_id for e in entries),
        gpus_per_node=want.wanted.gpu_count,
        created_at=op.clock(),
        overlay=want.wanted.overlay,
    )
    op.book.add_cluster(record)
    logger.info("cluster=%s leases=%s", record.cluster_id, record.lease_ids)
    cluster = cluster_of(record, entries)
    if record.overlay:
        await _join_or_release(op, cluster)
    return cluster


async def rejoin_overlay(op: Operator, cluster: Cluster, timeout_s: float | None = None) -> Cluster:
    """Join an overlay cluster's members again, with fresh keys: a member whose lease restarted lost
    its interface with its container. Each member's access is asked of its miner first (a container
    made again has new ports); a failure leaves every lease as it is (``OverlayFailed``)."""
    if not cluster.overlay:
        raise UsageError(f"cluster {cluster.cluster_id} has no overlay (rent one with --nodes N --overlay)")
    entries = await asyncio.gather(*(op.status(m.lease_id) for m in cluster.members))
    refreshed = replace(cluster, members=tuple(entries))
    await join_overlay(refreshed.members, timeout_s)
    return refreshed


async def _join_or_release(op: Operator, cluster: Cluster) -> None:
    """Join the members' overlay; on any failure or interrupt release every member first."""
    try:
        await join_overlay(cluster.members)
    except asyncio.CancelledError:
        op.undone = await asyncio.shield(release_cluster(op, cluster))
        raise
    except OverlayFailed as exc:
        raise OverlayFailed(await release_saying(op, cluster, exc.message)) from exc
    except BaseException:
        await asyncio.shield(release_cluster(op, cluster))
        raise


async def _release_made(op: Operator, tasks: Sequence[asyncio.Future[Allocation]]) -> list[Settled]:
    """Wait (bounded) for every member's allocation, release each lease made, settle intents."""
    waited = asyncio.gather(*(asyncio.shield(t) for t in tasks), return_exceptions=True)
    try:
        await asyncio.wait_for(waited, UNDO_GRACE_S)
    except asyncio.TimeoutError:
        logger.warning("cluster allocation: some members did not answer in %.0f s", UNDO_GRACE_S)
    made = [t.result().entry for t in tasks if t.done() and not t.cancelled() and t.exception() is None]
    done = await release_entries(op, made)
    return done + await op.settle_intents()


async def release_entries(op: Operator, entries: Sequence[BookEntry]) -> list[Settled]:
    """Deallocate every active lease of ``entries`` at once; one ``Settled`` each."""
    active = [e for e in entries if e.state == "active"]
    results = await asyncio.gather(*(op.deallocate(e.lease_id) for e in active), return_exceptions=True)
    done = []
    for entry, result in zip(active, results, strict=True):
        if isinstance(result, Refused):
            done.append(Settled("", entry.miner_hotkey, entry.lease_id, entry.state, result.message))
        elif isinstance(result, BaseException):
            raise result
        else:
            done.append(
                Settled("", entry.miner_hotkey, entry.lease_id, result.state if result else "released")
            )
    return done


async def release_saying(op: Operator, cluster: Cluster, why: str) -> str:
    """Release every member (shielded from a cancellation) and say so, with ``why``: the message of
    the error a cluster that could not be kept ends with."""
    released = await asyncio.shield(release_cluster(op, cluster))
    kept = [s.lease_id or "?" for s in released if s.problem]
    return (
        f"cluster {cluster.cluster_id} released ({len(released) - len(kept)} lease(s)"
        + (f"; not released: {', '.join(kept)}" if kept else "")
        + f"): {why}"
    )


async def release_cluster(op: Operator, cluster: Cluster) -> list[Settled]:
    """End every member lease now (a member already ended is left as it is)."""
    return await release_entries(op, cluster.members)
