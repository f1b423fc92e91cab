"""``register.py cluster check``: the interconnect proof across a rented cluster, the renter judging.

Each node runs the interconnect participant (``python -m compute.interconnect.participant``, gloo on
CPU, NCCL on CUDA) in its own lease over the node's pinned SSH session; the renter draws the secret
key, times the collective on its own clock and verifies the opened chunks exactly, as a validator
does (docs/cluster.md#the-proof), then times a plain all-reduce of the same size on the same group.
So the figure is the link as rented, in the renter's own time, not a link shown to a validator at
another moment: a fast path kept for proofs does not reach it. It moves no money and no score.
Every verdict (passed or not) is kept in the renter's lease book with the moment it was taken
(``LeaseBook.last_link``), which ``cluster show`` and ``list`` print beside the cluster.

``allocate_linked_cluster`` is ``allocate --nodes N --min-link-gbps X``: the cluster is rented,
checked this way, and kept only when it passed at X Gbit/s per link or more; otherwise (a failed
proof, nodes that could not join, an interrupt) every member is released before the error goes on.

What it needs in each lease: a Python with torch, numpy, pydantic and this package importable
(``--python``); embedded leases use the miner host's. Its bounds are the proof's: the interval holds
the reveal's and the commitments' SSH trips, so a far renter understates the link (a larger
``--mib`` weighs them less), and it is the ring's slowest link.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import shlex
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import asyncssh

from compute.interconnect import InterconnectSession, InterconnectVerdict, PlainResult, new_challenge
from compute.interconnect.wire import MAX_LINE_BYTES
from compute.operator.book import LeaseBook, LinkRecord
from compute.operator.cluster import Cluster, ClusterWanted, allocate_cluster, release_cluster, release_saying
from compute.operator.errors import NoMatchingMachine, Refused
from compute.operator.service import Operator
from compute.operator.shell import LeaseAccess, LeaseShell

logger = logging.getLogger(__name__)

PARTICIPANT = "-m compute.interconnect.participant"
STDERR_TAIL_BYTES = 2048
READ_BYTES = 1 << 16


@dataclass(frozen=True)
class CheckOptions:
    mib: float = 64.0  # the all-reduced vector
    python: str = "python3"  # the interpreter in each lease
    ifname: str | None = None  # GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME for every node
    device: str = "auto"  # cuda when the lease has one, else cpu
    timeout_s: float = 120.0  # joining the group, and the proof's deadline


class SshChannel:
    """One node's participant session as the proof's blocking ``Channel``: lines are read by a task
    on the connection's event loop into a queue the proof's reader thread takes from, and written
    back through the loop. A line over ``MAX_LINE_BYTES`` is cut (and fails to parse)."""

    def __init__(
        self, endpoint: str, process: asyncssh.SSHClientProcess, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.endpoint, self._process, self._loop = endpoint, process, loop
        self._lines: queue.Queue[bytes] = queue.Queue()
        self.stderr_tail = b""
        self._tasks = [loop.create_task(self._pump()), loop.create_task(self._pump_stderr())]

    def send(self, line: str) -> None:
        self._loop.call_soon_threadsafe(self._write, line.encode())

    def _write(self, data: bytes) -> None:
        if not self._process.stdin.is_closing():
            self._process.stdin.write(data)

    def readline(self) -> bytes:
        return self._lines.get()  # b"": the session ended

    async def _pump(self) -> None:
        buffer, scanned = bytearray(), 0  # only new bytes are searched: a long line costs O(its size)
        try:
            while data := await self._process.stdout.read(READ_BYTES):
                buffer += data
                while (end := buffer.find(b"\n", scanned)) >= 0:
                    self._lines.put(bytes(buffer[: end + 1]))
                    del buffer[: end + 1]
                    scanned = 0
                scanned = len(buffer)
                if len(buffer) > MAX_LINE_BYTES:
                    self._lines.put(bytes(buffer[: MAX_LINE_BYTES + 1]))
                    buffer.clear()
                    scanned = 0
        except (OSError, asyncssh.Error):
            pass
        finally:
            self._lines.put(b"")

    async def _pump_stderr(self) -> None:
        with contextlib.suppress(OSError, asyncssh.Error):
            while data := await self._process.stderr.read(READ_BYTES):
                self.stderr_tail = (self.stderr_tail + data)[-STDERR_TAIL_BYTES:]

    async def close(self) -> None:
        """End the participant's input (it leaves at its end) and the session."""
        with contextlib.suppress(OSError, asyncssh.Error):
            self._process.stdin.write_eof()
        with contextlib.suppress(asyncio.TimeoutError, OSError, asyncssh.Error):
            await asyncio.wait_for(self._process.wait_closed(), 5)
        self._process.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def node_command(cluster: Cluster, rank: int, options: CheckOptions) -> str:
    """The participant's shell line for ``rank``. ``MALLOC_ARENA_MAX``: a lease's memory may be an
    address-space limit (the embedded backend's ``RLIMIT_AS``), where every thread's malloc arena
    reserves 64 MiB; torch's and gloo's threads then fail a 1 GiB lease's allocations."""
    env = dict(cluster.env(rank), PYTHONUNBUFFERED="1", MALLOC_ARENA_MAX="2")
    if options.ifname:
        env.update(GLOO_SOCKET_IFNAME=options.ifname, NCCL_SOCKET_IFNAME=options.ifname)
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"export {exports}; exec {shlex.quote(options.python)} {PARTICIPANT}"


@dataclass(frozen=True)
class CheckReport:
    verdict: InterconnectVerdict
    vector_bytes: int
    link_bytes: float
    plain: PlainResult | None
    errors: dict[int, str] = field(default_factory=dict)  # a failed proof: each node's last stderr line

    @property
    def plain_gbs(self) -> float | None:
        if self.plain is None or self.plain.interval_s <= 0:
            return None
        return round(self.link_bytes / self.plain.interval_s / 1e9, 4)

    def record(self, cluster_id: str, at: float) -> LinkRecord:
        return LinkRecord(
            cluster_id=cluster_id,
            checked_at=at,
            passed=self.verdict.passed,
            bandwidth_gbs=round(self.verdict.bandwidth_gbs, 4),
            plain_gbs=self.plain_gbs,
            vector_bytes=self.vector_bytes,
            interval_s=round(self.verdict.interval_s or 0.0, 4),
            failures=tuple(self.verdict.failures),
        )

    def payload(self, cluster: Cluster) -> dict[str, Any]:
        return {
            "cluster_id": cluster.cluster_id,
            "nodes": len(cluster.members),
            "passed": self.verdict.passed,
            "failures": list(self.verdict.failures),
            "vector_bytes": self.vector_bytes,
            "link_bytes": int(self.link_bytes),
            "interval_s": round(self.verdict.interval_s or 0.0, 4),
            "bandwidth_gbs": round(self.verdict.bandwidth_gbs, 4),  # per link, the renter's clock
            "plain_gbs": self.plain_gbs,  # a plain all-reduce of the same size, the same clock
            "verify_cpu_s": round(self.verdict.verify_cpu_s, 4),
            "node_errors": {str(rank): line for rank, line in self.errors.items()},
        }


async def check_cluster(
    cluster: Cluster, options: CheckOptions = CheckOptions(), book: LeaseBook | None = None
) -> CheckReport:
    """Run the proof across every node of ``cluster``; ``Refused`` when the nodes could not join
    (each failing node's last stderr in the message), else the verdict, passed or not, which is
    also kept in ``book`` when one is given."""
    report = await _check(cluster, options)
    if book is not None:
        keep_link(book, cluster.cluster_id, report)
    return report


def keep_link(book: LeaseBook, cluster_id: str, report: CheckReport) -> bool:
    """Keep the verdict in the book for ``cluster show``/``list``; a book that cannot be written (a
    full disk) is logged and costs the caller nothing: the verdict is still returned to it."""
    try:
        book.add_link(report.record(cluster_id, time.time()))
    except (sqlite3.Error, OSError) as exc:
        logger.warning("cluster %s: the link proof was not kept in the book: %s", cluster_id, exc)
        return False
    return True


async def _check(cluster: Cluster, options: CheckOptions) -> CheckReport:
    if options.mib <= 0:
        raise Refused(f"--mib must be positive, got {options.mib:g}")
    loop = asyncio.get_running_loop()
    accesses = [LeaseAccess.of(entry) for entry in cluster.members]
    shells: list[LeaseShell] = []
    channels: list[SshChannel] = []
    try:
        shells = list(await asyncio.gather(*(LeaseShell.open(a) for a in accesses)))
        for rank, (shell, access) in enumerate(zip(shells, accesses, strict=True)):
            process = await shell.process(node_command(cluster, rank, options))
            channels.append(SshChannel(f"{access.host}:{access.port}", process, loop))
        init = f"tcp://{cluster.master_addr}:{cluster.master_port}"
        report = await _in_thread(lambda: _prove(channels, init, options))
        if not report.verdict.passed:  # what the failing nodes said, for the renter to act on
            report = replace(report, errors=_last_errors(channels))
        return report
    except TimeoutError as exc:
        tails = [f"rank {rank}: {line}" for rank, line in _last_errors(channels).items()]
        raise Refused(
            f"cluster {cluster.cluster_id}: {exc}" + ("; " + "; ".join(tails) if tails else "")
        ) from None
    finally:
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)
        await asyncio.gather(*(s.close() for s in shells), return_exceptions=True)


def _last_errors(channels: list[SshChannel]) -> dict[int, str]:
    """Each node's last line on stderr, where it wrote one."""
    lines = {
        rank: c.stderr_tail.decode("utf-8", "replace").strip().splitlines() for rank, c in enumerate(channels)
    }
    return {rank: found[-1][-300:] for rank, found in lines.items() if found}


def _prove(channels: list[SshChannel], init: str, options: CheckOptions) -> CheckReport:
    session = InterconnectSession(channels)  # type: ignore[arg-type]
    session.setup(init, device=options.device, timeout_s=options.timeout_s)
    challenge = new_challenge(
        [c.endpoint for c in channels], vector_bytes=int(options.mib * 1024**2), deadline_s=options.timeout_s
    )
    verdict = session.prove(challenge)
    plain = (
        session.plain(challenge.chunks * challenge.chunk_len, options.timeout_s) if verdict.passed else None
    )
    return CheckReport(verdict, challenge.vector_bytes, challenge.link_bytes, plain)


async def allocate_linked_cluster(
    op: Operator, want: ClusterWanted, duration_s: int, options: CheckOptions = CheckOptions()
) -> tuple[Cluster, CheckReport]:
    """Rent the cluster, prove its link (``check_cluster``) and keep it only at ``want.min_link_gbps``
    Gbit/s per link or more; else release every member (``op.undone`` set on an interrupt) and say
    why. Only the renter's own proof decides: nothing a miner reports can keep a cluster."""
    cluster = await allocate_cluster(op, want, duration_s)
    try:
        report = await check_cluster(cluster, options, op.book)
        gbit = report.verdict.bandwidth_gbs * 8
        wanted = want.min_link_gbps or 0.0
        if not report.verdict.passed:
            said = "".join(f"; rank {rank} said: {line}" for rank, line in report.errors.items())
            why = "its link proof failed: " + "; ".join(report.verdict.failures[:3]) + said
        elif gbit < wanted:
            why = f"its link proved {gbit:.4g} Gbit/s per link, under --min-link-gbps {wanted:g}"
        else:
            return cluster, report
    except asyncio.CancelledError:
        op.undone = await asyncio.shield(release_cluster(op, cluster))
        raise
    except BaseException:
        await asyncio.shield(release_cluster(op, cluster))
        raise
    raise NoMatchingMachine(await release_saying(op, cluster, why))


async def _in_thread(work: Callable[[], CheckReport]) -> CheckReport:
    """``work`` on a daemon thread (its waits are bounded by its own timeouts; an interrupted
    command must not wait for them at exit, as an executor's thread would make it)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[CheckReport] = loop.create_future()

    def run() -> None:
        try:
            result = work()
        except BaseException as exc:  # handed to the awaiting task, raised there
            loop.call_soon_threadsafe(_settle, done, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, done, result, None)

    threading.Thread(target=run, daemon=True, name="cluster-check").start()
    return await done


def _settle(
    future: asyncio.Future[CheckReport], result: CheckReport | None, exc: BaseException | None
) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]


__all__ = [
    "CheckOptions",
    "CheckReport",
    "SshChannel",
    "allocate_linked_cluster",
    "check_cluster",
    "keep_link",
    "node_command",
]
