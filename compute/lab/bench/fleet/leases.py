"""Lightweight leases for the fleet benchmark: real SSH servers, the worker served in-process.

``FleetBackend`` is the embedded backend (an asyncssh server per lease, key-only, pinned host key)
with one difference: a session that runs the validator's exact bootstrap command is answered in this
process by a ``FleetProver`` instead of a ``python3`` child (256 x 8-GPU miners on one 2-core
machine cannot each run a worker process). The handshake is the real one: the validator uploads the
worker source through SSH, the lease echoes its SHA-256, then JSON lines flow both ways through the
encrypted channel. Any other command (a canary's ``echo``) runs as on the embedded backend.

The prover's work runs in small thread pools (numba, numpy and hashlib release the GIL): answers in
one, the lines of a timed chain in another, so a pass line never queues behind another session's
opening; lines are encoded there too (``wire``: a 36 MB opening's base64 copied, not scanned). Each
answer line is written when the simulated device would have finished, counted from the request's
arrival as the kernel stamped it (``rxstamp``: this busy process may read it much later) and stamped
when written, on this process's monotonic clock, so the benchmark can compare the validator's timing
with the prover's own (``SessionStats``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import asyncssh

import compute.lab.bench.fleet.rxstamp as rxstamp
from compute.allocation import EmbeddedBackend
from compute.lab.bench.fleet.prover import FleetProver
from compute.lab.bench.fleet.wire import encode_line
from compute.validator.session.pog_session import DEVICES, bootstrap_command

log = logging.getLogger(__name__)

BOOTSTRAPS = frozenset(bootstrap_command(device) for device in DEVICES)
TIMED_OPS = ("commit", "commit_on")
PASS_OPS = ("memory_pass",)  # the RAM proof's passes too (same op)


@dataclass(frozen=True)
class Executors:
    """The simulated miners' threads: ``answers`` computes answers (openings, builds, commitments),
    ``lines`` the next lines of a chain that is running (due on time, so never behind an answer)."""

    answers: ThreadPoolExecutor
    lines: ThreadPoolExecutor

    @classmethod
    def start(cls) -> Executors:
        return cls(
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="fleet-prover"),
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="fleet-lines"),
        )

    def shutdown(self) -> None:
        self.answers.shutdown(wait=False)
        self.lines.shutdown(wait=False)


@dataclass
class SessionStats:
    """What the miners' side saw: worker sessions at once, and when each timed answer was written."""

    open_now: int = 0
    open_max: int = 0
    sessions: int = 0
    timed: list[dict] = field(default_factory=list)  # op, owner, precision, recv, sent, late_s
    errors: list[str] = field(default_factory=list)
    pass_late_max_s: float = 0.0  # memory chains: how far past its due time a pass line left here
    read_late_max_s: float = 0.0  # how long after its arrival (kernel stamp) a request was read here

    def opened(self) -> None:
        self.open_now += 1
        self.sessions += 1
        self.open_max = max(self.open_max, self.open_now)

    def closed(self) -> None:
        self.open_now -= 1


class FleetBackend(EmbeddedBackend):
    """The embedded backend whose validator-worker sessions are answered by a ``FleetProver``."""

    def __init__(
        self,
        *args,
        prover: Callable[[], FleetProver],
        stats: SessionStats,
        executors: Executors,
        owner: str,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._prover, self._stats, self._executors, self._owner = prover, stats, executors, owner

    def _listener(self, state) -> socket.socket:  # type: ignore[override]
        """Connections that stamp their reads with the kernel's receive time (``rxstamp``)."""
        return rxstamp.listening(self.bind_host, state.port)

    async def _session(self, state, process: asyncssh.SSHServerProcess) -> None:  # type: ignore[override]
        if process.command not in BOOTSTRAPS:
            await super()._session(state, process)
            return
        self._stats.opened()
        try:
            await serve_worker(process, self._prover(), self._stats, self._executors, self._owner)
        except (OSError, asyncssh.Error, asyncio.IncompleteReadError, ValueError) as exc:
            log.debug("fleet: session of lease=%s ended: %s", state.record.lease_id, exc)
        finally:
            self._stats.closed()
            process.exit(0)


def _write(process: asyncssh.SSHServerProcess, line: dict) -> None:
    process.stdout.write(encode_line(line))


async def serve_worker(
    process: asyncssh.SSHServerProcess,
    prover: FleetProver,
    stats: SessionStats,
    executors: Executors,
    owner: str,
) -> None:
    """The worker's side of ``PogSession``: upload digest, then one request line at a time."""
    size = int((await process.stdin.readline()).strip() or b"0")
    source = await process.stdin.readexactly(size)
    process.stdout.write(hashlib.sha256(source).hexdigest().encode() + b"\n")
    loop = asyncio.get_running_loop()
    transport_socket = process.get_extra_info("socket")
    while True:
        raw = await process.stdin.readline()
        if not raw:
            return
        # the request's arrival, not this busy loop's read of it: what the device would count from
        read = time.monotonic()
        received = min(read, rxstamp.received_at(transport_socket) or read)
        stats.read_late_max_s = max(stats.read_late_max_s, read - received)
        try:
            message = json.loads(raw)
            if not isinstance(message, dict):
                raise ValueError("each request must be a JSON object")
            if message.get("op") == "exit":
                _write(process, {"ok": True, "op": "exit"})
                return
            if message.get("op") == "ping":  # answered at once, as the real worker does (no thread hop)
                _write(process, {"ok": True, "op": "ping"})
                await process.stdout.drain()
                continue
            answer = await loop.run_in_executor(executors.answers, prover.handle, message)
        except (BrokenPipeError, ConnectionError, asyncssh.Error):
            return  # the validator closed the session
        except Exception as exc:  # the request boundary, as in the real worker
            stats.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            _write(process, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            continue
        lines = iter(answer.lines)
        try:
            await _write_lines(process, lines, received, message, stats, executors.lines, owner)
        except (BrokenPipeError, ConnectionError, asyncssh.Error):
            return
        except Exception as exc:  # a generator's failure mid-answer: reported like the real worker
            stats.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            _write(process, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})


def next_due(lines: Iterator[tuple[float, dict]], held: list[tuple[float, dict]]) -> list[tuple[float, dict]]:
    """The next lines due at one moment (every GPU's pass ``r``), computed in one thread hop.

    ``held`` carries the one line read past the moment to the next call. A real 8-GPU worker's
    devices write their pass lines independently; one hop per line, on a loaded machine, made the
    last GPU's lines leave a third of a second after the first's -- a skew of the simulation, not of
    the validator, that the lockstep residency judge rightly counts as a late chain."""
    group = held[:]
    held.clear()
    if not group:
        first = next(lines, None)
        if first is None:
            return []
        group = [first]
    while (item := next(lines, None)) is not None:
        if item[0] != group[0][0]:
            held.append(item)
            break
        group.append(item)
    return group


CHUNK = 1 << 20


async def _send(process: asyncssh.SSHServerProcess, data: bytes) -> None:
    """A line into the channel; a big one in 1 MiB pieces, the loop free between them (asyncssh
    copies what it is given into its buffer: 36 MB at once held every other session's line)."""
    if len(data) <= CHUNK:
        process.stdout.write(data)
        return
    view = memoryview(data)
    for at in range(0, len(data), CHUNK):
        process.stdout.write(view[at : at + CHUNK])
        await process.stdout.drain()


def next_encoded(
    lines: Iterator[tuple[float, dict]], held: list[tuple[float, dict]]
) -> list[tuple[float, str, bytes]]:
    """``next_due``'s lines as (offset, op, the line's bytes): encoded off the event loop too."""
    return [(at, str(line.get("op")), encode_line(line)) for at, line in next_due(lines, held)]


async def _write_lines(process, lines, received: float, message: dict, stats, executor, owner: str) -> None:
    """Each line at its offset from ``received`` (computed and encoded in the prover's threads just
    before); a memory pass's lines, one per GPU, in one write, as the worker writes them."""
    loop = asyncio.get_running_loop()
    held: list[tuple[float, dict]] = []
    while group := await loop.run_in_executor(executor, next_encoded, lines, held):
        wait = received + group[0][0] - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        if group[0][1] in PASS_OPS:
            stats.pass_late_max_s = max(stats.pass_late_max_s, -wait)
            if all(op in PASS_OPS for _, op, _ in group):  # one pass, every GPU: one write, as the worker
                await _send(process, b"".join(data for _, _, data in group))
                continue
        for _, op, data in group:
            await _send(process, data)
            if op in TIMED_OPS:
                sent = time.monotonic()
                precision = (message.get("challenge") or {}).get("precision")
                stats.timed.append(
                    {
                        "op": op,
                        "owner": owner,
                        "precision": precision,
                        "challenge_id": (message.get("challenge") or {}).get("challenge_id"),
                        "held_s": sent - received,
                        "late_s": max(0.0, -wait),
                    }
                )
        await process.stdout.drain()
