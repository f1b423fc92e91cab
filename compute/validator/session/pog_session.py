"""Drive the PoG worker inside a miner's lease: one SSH exec session, JSON lines on stdin/stdout.

The session runs a FIXED bootstrap (``python3 -u -c BOOTSTRAP --device D``; nothing the miner
said is interpolated) that reads a length line and exactly that many bytes of worker source from
stdin, echoes their sha256 (transport integrity only: the proof is the mathematics), and execs the
source as ``__main__``. The validator then speaks the worker protocol (info -> commit -> open)
with a bounded line reader and a timeout on every read.

Every byte of the session goes through the validator's timing process (``clock``): it writes each
request line and stamps it right before it leaves, and stamps each reply line the moment its bytes
arrive, on the system-wide monotonic clock, so the validator's own load (dashboard, parsing,
verification) cannot move a timing. ``commit`` is timed from the challenge line's stamp to the
commitment line's; the in-depth ops (docs/pog-depth.md) stream intermediate lines (each
``memory_pass`` and ``segment`` line stamped on arrival; out-of-order or foreign lines are protocol
errors). Every line is parsed by ``worker_reply`` (large ones in a thread): malformed output of any
kind is a ``WorkerProtocolError``, never an exception out of the parser.

The host key is pinned to the one the lease reported; nothing is ever auto-accepted. This module
does not verify proofs or score anything: it returns parsed wire models and timings.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import shlex
from dataclasses import dataclass
from typing import Protocol, TypeVar

import asyncssh
from pydantic import BaseModel

from compute.pog import (
    Challenge,
    Commitment,
    MemoryChallenge,
    MemoryCommitment,
    MemoryOpening,
    MemoryOpenRequest,
    Opening,
    OpeningRequest,
    worker_script,
)
from compute.pog.spool import SpooledLine
from compute.validator.session.clock import Clock, ClockFailed, spooled_lines
from compute.validator.session.worker_reply import (
    DeviceInfo,
    PogSessionError,
    WorkerFailed,
    WorkerProtocolError,
    parse_devices,
)
from compute.validator.session.worker_reply import parse_json as _parse_json
from compute.validator.session.worker_reply import parse_model as _model
from compute.validator.session.worker_reply import parse_reply as _parse_reply

log = logging.getLogger(__name__)

BOOTSTRAP = (
    "import hashlib,sys\n"
    "i=sys.stdin.buffer\n"
    "n=int(i.readline(32))\n"
    "s=i.read(n)\n"
    "sys.stdout.write(hashlib.sha256(s).hexdigest()+chr(10))\n"
    "sys.stdout.flush()\n"
    "del i,n\n"
    'exec(compile(s,"pog_worker","exec"),globals())\n'
)
DEVICES = ("auto", "cpu", "cuda")
# AES-GCM first (then asyncssh's defaults): with AES-NI it decrypts the 38 MB memory openings at
# ~2.8 GB/s per core, asyncssh's chacha20-poly1305 (a ChaCha20 pass, then Poly1305) ~3x slower; the
# fleet benchmark saw chacha20 take 28 % of the validator's event-loop CPU (docs/benchmarks.md);
# the timing process, which now holds the sessions, is asked for them (``ciphers`` in ``open``).
CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"
SMALL_LINE = 1 << 16
BIG_LINE = 1 << 20  # lines longer than this are parsed in a thread (openings of many GPUs)
M = TypeVar("M", bound=BaseModel)


class SshFailed(PogSessionError):
    """Could not connect, authenticate, pin the host key, or start the command."""


class WorkerTimeout(PogSessionError):
    """The worker stayed silent past the deadline."""


class ChannelBroken(PogSessionError):
    """The SSH channel broke while the worker was being started or uploaded (a broken pipe, the
    command gone before its source arrived): transport trouble, not an answer. Opening a session
    again is worth it (``compute.validator.check.lease.open_session`` retries)."""


@dataclass(frozen=True)
class TimedCommitment:
    commitment: Commitment
    elapsed_s: float  # the validator's clock: challenge written -> commitment line received


@dataclass(frozen=True)
class TimedMemory:
    commitment: MemoryCommitment
    arrivals: list[list[float]]  # per GPU, the validator's clock at each memory_pass line
    elapsed_s: float
    started_at: float = 0.0  # the validator's clock when the start nonce (memory_commit) was written
    build_s: float = 0.0  # memory_build written -> its reply received (A resident on every GPU)


@dataclass(frozen=True)
class TimedSeries:
    sent_at: float  # the validator's clock when the segments were written
    arrivals: list[float]  # one per segment line
    commitments: list[Commitment]


class MemoryGate(Protocol):
    """A lockstep window's gates around one memory proof (``compute.validator.lockstep``): the build
    waits for every seat to be prepared, the start nonce for every seat to be built."""

    async def before_build(self) -> None: ...

    async def before_start(self) -> None: ...

    def started(self, at: float) -> None: ...


def bootstrap_command(device: str = "auto") -> str:
    """The exact command line run in the lease (fixed text; ``device`` is the validator's choice)."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    return f"python3 -u -c {shlex.quote(BOOTSTRAP)} --device {device}"


def opening_line_limit(request: OpeningRequest, p: int) -> int:
    """Largest honest ``open`` answer for ``request``: base64 rows plus 64-deep Merkle paths."""
    rows = sum(len(r) for r in request.rows)
    return SMALL_LINE + rows * (p * 4 * 4 // 3 + 8 + 64 * 70 + 128)


class PogSession:
    """One running worker, held by the timing process; ``async with await PogSession.open(...)``."""

    def __init__(self, clock: Clock, sid: str) -> None:
        self._clock = clock
        self._sid = sid
        self.stderr_tail = ""

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        username: str,
        client_key: asyncssh.SSHKey,
        host_key: str,
        *,
        timeout: float,
        device: str = "auto",
        proxy: list[str] | None = None,
    ) -> PogSession:
        """Connect with the per-round key, pin ``host_key``, start the worker, check the digest.
        ``proxy``: reach ``host:port`` through this command's stdin/stdout (an SSH ProxyCommand)."""
        try:
            asyncssh.import_public_key(host_key.strip())
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise SshFailed(f"lease host key does not parse: {exc}") from None
        clock = Clock.shared()
        session = cls(clock, secrets.token_hex(8))
        source, digest = worker_script()
        payload = source.encode("utf-8")
        header = {
            "op": "open",
            "sid": session._sid,
            "host": host,
            "port": port,
            "username": username,
            "key": client_key.export_private_key("openssh").decode(),
            "host_key": host_key,
            "command": bootstrap_command(device),
            "timeout": timeout,
            "proxy": proxy or None,
            "ciphers": CIPHERS,
        }
        reply, first = await clock.call(header, b"%d\n" % len(payload) + payload)
        if not reply["ok"]:
            if reply.get("kind") in ("eof", "channel"):  # the command went away under the upload
                raise ChannelBroken(f"worker upload: {_failure_text(reply)}")
            raise _failure(reply)
        echoed = first.strip().decode("ascii", "replace")
        if echoed != digest:
            await session.close()
            raise WorkerProtocolError(f"worker upload digest mismatch: got {echoed[:80]!r}")
        return session

    async def _exchange(
        self,
        message: dict | None,
        op: str,
        limit: int,
        timeout: float,
        stream: str | None = None,
        most: int = 0,
    ) -> tuple[float, list[tuple[float, bytes]]]:
        """Write ``message`` (None: nothing) and read its line(s): (sent at, [(arrival, line)...]),
        both on the timing process's clock."""
        header: dict = {"op": "request", "sid": self._sid, "limit": limit, "timeout": timeout}
        if stream is not None:
            header.update(stream=stream, max_lines=most)
        sent, lines = await self._exchange_lines(header, message)
        plain: list[tuple[float, bytes]] = []
        for stamp, raw in lines:
            if not isinstance(raw, bytes):  # only ``request_line`` asks for spooling
                raw.discard()
                raise ClockFailed("the timing process spooled a line nobody asked it to")
            plain.append((stamp, raw))
        return sent, plain

    async def _exchange_lines(
        self, header: dict, message: dict | None
    ) -> tuple[float, list[tuple[float, bytes | SpooledLine]]]:
        """``_exchange``'s request; a line spooled by the timing process (``spool`` asked) comes back
        as its ``SpooledLine``."""
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n" if message is not None else b""
        reply, payload = await self._clock.call(header, line)
        if not reply["ok"]:
            self.stderr_tail = reply.get("stderr") or self.stderr_tail
            raise _failure(reply)
        lines = spooled_lines(reply, payload)
        return float(reply["sent_at"]), list(zip((float(s) for s in reply["stamps"]), lines, strict=True))

    async def _request(self, message: dict, op: str, limit: int, timeout: float) -> dict:
        _, ((_, raw),) = await self._exchange(message, op, limit, timeout)
        return await _parse_off_loop(raw, op)

    async def ping(self, timeout: float) -> float:
        """One round trip to the worker on the timing process's clock (seconds)."""
        sent, ((arrived, raw),) = await self._exchange({"op": "ping"}, "ping", SMALL_LINE, timeout)
        _parse_reply(raw, "ping")
        return arrived - sent

    async def info(self, timeout: float) -> list[DeviceInfo]:
        reply = await self._request({"op": "info"}, "info", SMALL_LINE, timeout)
        return parse_devices(reply)

    async def warm_up(self, challenge: Challenge, timeout: float) -> float | None:
        """Let the worker run a throwaway product at the coming challenge's shape, off the clock;
        its seconds on the validator's clock (a size hint), None when refused.

        Only the shape travels: the key and id are fresh random values, so nothing of the real
        challenge is known before ``commit`` starts the clock. A worker that refuses only loses
        its own warm-up (the timed commit is then slower), so a refusal is not an error.
        """
        shape = challenge.model_copy(
            update={"key": secrets.token_hex(16), "challenge_id": secrets.token_hex(16)}
        )
        message = {"op": "warmup", "challenge": shape.model_dump(mode="json")}
        try:
            sent, ((arrived, raw),) = await self._exchange(message, "warmup", SMALL_LINE, timeout)
            _parse_reply(raw, "warmup")
        except WorkerProtocolError as exc:
            log.debug("worker warm-up refused: %s", exc)
            return None
        return arrived - sent

    async def commit(self, challenge: Challenge, timeout: float) -> TimedCommitment:
        """Send the challenge and time the round trip to the commitment on the validator's clock."""
        message = {"op": "commit", "challenge": challenge.model_dump(mode="json")}
        sent, ((arrived, raw),) = await self._exchange(message, "commit", SMALL_LINE, timeout)
        reply = _parse_reply(raw, "commit")
        commitment = _model(Commitment, reply.get("commitment"), "commit")
        if commitment.challenge_id != challenge.challenge_id:
            raise WorkerProtocolError("commit: commitment is for another challenge")
        if len(commitment.roots) != challenge.gpu_count:
            raise WorkerProtocolError(f"commit: {len(commitment.roots)} roots for {challenge.gpu_count} GPUs")
        return TimedCommitment(commitment, arrived - sent)

    async def request_line(self, message: dict, limit: int, timeout: float) -> bytes | SpooledLine:
        """Send ``message``; its reply line unparsed. For the big replies (openings), which are parsed
        and verified off the event loop (``compute.pog.offload``, ``verify_pool``): a line past
        ``clock_child.SPOOL_MIN`` bytes is written to a spool file as it arrives and comes back as its
        ``SpooledLine`` (the caller deletes it: ``verify_lines`` does), so neither this process nor
        the timing process ever holds it whole."""
        header = {"op": "request", "sid": self._sid, "limit": limit, "timeout": timeout, "spool": True}
        _, ((_, raw),) = await self._exchange_lines(header, message)
        return raw

    async def open_rows_line(self, request: OpeningRequest, p: int, timeout: float) -> bytes | SpooledLine:
        """The ``open`` reply line for ``request``, unparsed (see ``request_line``)."""
        message = {"op": "open", "request": request.model_dump(mode="json")}
        return await self.request_line(message, opening_line_limit(request, p), timeout)

    async def open_rows(self, request: OpeningRequest, p: int, timeout: float) -> Opening:
        message = {"op": "open", "request": request.model_dump(mode="json")}
        reply = await self._request(message, "open", opening_line_limit(request, p), timeout)
        return await _model_off_loop(Opening, reply.get("opening"), "open")

    # ------------------------------------------------------------ in-depth proofs (docs/pog-depth.md)

    async def commit_on(self, challenge: Challenge, device: int, timeout: float) -> TimedCommitment:
        """A one-GPU challenge on ``device`` alone, timed like ``commit`` (open it with ``open_rows``)."""
        message = {"op": "commit_on", "device": device, "challenge": challenge.model_dump(mode="json")}
        sent, ((arrived, raw),) = await self._exchange(message, "commit_on", SMALL_LINE, timeout)
        reply = _parse_reply(raw, "commit_on")
        commitment = _model(Commitment, reply.get("commitment"), "commit_on")
        if commitment.challenge_id != challenge.challenge_id or len(commitment.roots) != 1:
            raise WorkerProtocolError("commit_on: commitment is for another challenge")
        return TimedCommitment(commitment, arrived - sent)

    async def memory_commit(
        self, challenge: MemoryChallenge, timeout: float, slot: str = "memory", gate: MemoryGate | None = None
    ) -> TimedMemory:
        """Build A (``memory_build``), then send the start nonce (``memory_commit``) and stamp every
        ``memory_pass`` line per GPU on arrival; the chain cannot begin before the start is sent.
        ``slot="ram"``: the same proof resident in host memory (``ram_build``, ``ram_commit``).
        ``gate``: a lockstep window's gates, awaited before the build and before the start."""
        gpus, passes, build, commit = challenge.gpu_count, challenge.passes, f"{slot}_build", f"{slot}_commit"
        message = {"op": build, "challenge": challenge.build_message()}
        if gate is not None:
            await gate.before_build()
        sent, ((built, raw),) = await self._exchange(message, build, SMALL_LINE, timeout)
        ready = _parse_reply(raw, build)
        if (
            not isinstance(ready.get("ready"), dict)
            or ready["ready"].get("challenge_id") != challenge.challenge_id
        ):
            raise WorkerProtocolError(f"{build}: reply is for another challenge")
        if gate is not None:
            await gate.before_start()
        started, lines = await self._exchange(
            {"op": commit, "request": challenge.start_message()},
            commit,
            SMALL_LINE + gpus * passes * 80,
            timeout,
            stream="memory_pass",
            most=gpus * passes,
        )
        if gate is not None:
            gate.started(started)  # the timing process's stamp of the start line: before "chained"
        arrivals: list[list[float]] = [[] for _ in range(gpus)]
        for now, raw in lines[:-1]:
            line = _parse_json(raw, commit)
            gpu = line.get("gpu")
            if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < gpus:
                raise WorkerProtocolError(f"{commit}: unexpected line {raw[:80]!r}")
            if line.get("pass") == len(arrivals[gpu]) + 1 <= passes:
                arrivals[gpu].append(now)
            else:
                raise WorkerProtocolError(f"{commit}: out-of-order line {raw[:80]!r}")
        last, raw = lines[-1]
        line = _parse_json(raw, commit)
        if line.get("op") != commit:
            _parse_reply(raw, commit)  # raises the worker's error, or a protocol error
            raise WorkerProtocolError(f"{commit}: unexpected line {raw[:80]!r}")
        reply = _parse_reply(raw, commit)
        commitment = _model(MemoryCommitment, reply.get("commitment"), commit)
        if commitment.challenge_id != challenge.challenge_id:
            raise WorkerProtocolError(f"{commit}: commitment is for another challenge")
        return TimedMemory(commitment, arrivals, last - started, started, built - sent)

    async def memory_open_line(
        self, request: MemoryOpenRequest, n: int, timeout: float, slot: str = "memory"
    ) -> bytes | SpooledLine:
        """The ``<slot>_open`` reply line, unparsed (see ``request_line``)."""
        vectors = sum(2 * len(p) for p in request.passes)
        message = {"op": f"{slot}_open", "request": request.model_dump(mode="json")}
        return await self.request_line(message, SMALL_LINE + vectors * (n * 16 // 3 + 256), timeout)

    async def memory_open(
        self, request: MemoryOpenRequest, n: int, timeout: float, slot: str = "memory"
    ) -> MemoryOpening:
        vectors = sum(2 * len(p) for p in request.passes)
        limit = SMALL_LINE + vectors * (n * 16 // 3 + 256)
        op = f"{slot}_open"
        reply = await self._request(
            {"op": op, "request": request.model_dump(mode="json")}, op, limit, timeout
        )
        return await _model_off_loop(MemoryOpening, reply.get("opening"), op)

    async def sustained(self, segments: list[Challenge], timeout: float) -> TimedSeries:
        """Run segments back to back; ``timeout`` bounds the silence between two segment lines."""
        message = {"op": "sustained", "segments": [c.model_dump(mode="json") for c in segments]}
        sent_at, lines = await self._exchange(
            message, "sustained", SMALL_LINE, timeout, stream="segment", most=len(segments)
        )
        arrivals: list[float] = []
        commitments: list[Commitment] = []
        for now, raw in lines[:-1]:
            line = _parse_json(raw, "sustained")
            if line.get("index") != len(arrivals) or len(arrivals) >= len(segments):
                raise WorkerProtocolError(f"sustained: unexpected segment line {raw[:80]!r}")
            commitment = _model(Commitment, line.get("commitment"), "sustained")
            if commitment.challenge_id != segments[len(arrivals)].challenge_id:
                raise WorkerProtocolError("sustained: segment commitment is for another challenge")
            arrivals.append(now)
            commitments.append(commitment)
        _parse_reply(lines[-1][1], "sustained")
        if len(arrivals) != len(segments):
            raise WorkerProtocolError(f"sustained: {len(arrivals)} segments for {len(segments)} sent")
        return TimedSeries(sent_at, arrivals, commitments)

    async def sustained_open_line(
        self, index: int, request: OpeningRequest, p: int, timeout: float
    ) -> bytes | SpooledLine:
        """The ``sustained_open`` reply line, unparsed (see ``request_line``)."""
        message = {"op": "sustained_open", "index": index, "request": request.model_dump(mode="json")}
        return await self.request_line(message, opening_line_limit(request, p), timeout)

    async def sustained_open(self, index: int, request: OpeningRequest, p: int, timeout: float) -> Opening:
        message = {"op": "sustained_open", "index": index, "request": request.model_dump(mode="json")}
        reply = await self._request(message, "sustained_open", opening_line_limit(request, p), timeout)
        return await _model_off_loop(Opening, reply.get("opening"), "sustained_open")

    async def probe(
        self, request: dict, timeout: float, op: str = "probe", limit: int = SMALL_LINE
    ) -> tuple[dict, float]:
        """One host probe (``probe``: CPU; ``disk_write``, ``disk_read``); returns (result, seconds on
        the validator's clock)."""
        sent, ((arrived, raw),) = await self._exchange({"op": op, "request": request}, op, limit, timeout)
        reply = await _parse_off_loop(raw, op)
        result = reply.get("result")
        if not isinstance(result, dict):
            raise WorkerProtocolError(f"{op}: result is not an object")
        return result, arrived - sent

    async def close(self) -> None:
        """Ask the worker to exit, then tear the connection down (never raises, never hangs)."""
        try:
            await asyncio.wait_for(self._clock.call({"op": "close", "sid": self._sid}), 10)
        except (asyncio.TimeoutError, ClockFailed):
            pass

    async def __aenter__(self) -> PogSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _failure_text(reply: dict) -> str:
    error = str(reply.get("error") or "failed")
    if reply.get("kind") == "eof":
        tail = str(reply.get("stderr") or "").strip().splitlines()[-1:] or ["no stderr"]
        return f"worker exited ({tail[0][:200]})"
    return error


def _failure(reply: dict) -> Exception:
    """The session error a failed answer of the timing process stands for."""
    kind, text = reply.get("kind"), _failure_text(reply)
    if kind == "timeout":
        return WorkerTimeout(text)
    if kind == "ssh":
        return SshFailed(text)
    if kind in ("eof", "channel", "protocol"):
        return WorkerProtocolError(text)
    return ClockFailed(f"timing process: {text}")  # the validator's own trouble, not the miner's


async def _parse_off_loop(raw: bytes, op: str) -> dict:
    """``parse_reply`` of one line; a large one in a thread, so the event loop keeps serving."""
    if len(raw) <= BIG_LINE:
        return _parse_reply(raw, op)
    return await asyncio.to_thread(_parse_reply, raw, op)


async def _model_off_loop(model: type[M], value: object, op: str) -> M:
    return await asyncio.to_thread(_model, model, value, op)


__all__ = [
    "BOOTSTRAP",
    "ChannelBroken",
    "ClockFailed",
    "DeviceInfo",
    "MemoryGate",
    "PogSession",
    "PogSessionError",
    "SshFailed",
    "TimedCommitment",
    "TimedMemory",
    "TimedSeries",
    "WorkerFailed",
    "WorkerProtocolError",
    "WorkerTimeout",
    "bootstrap_command",
    "opening_line_limit",
]
