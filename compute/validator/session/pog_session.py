"""Drive the PoG worker inside a miner's lease: one SSH exec session, JSON lines on stdin/stdout.

The session runs a FIXED bootstrap (``python3 -u -c BOOTSTRAP --device D``; nothing the miner
said is interpolated) that reads a length line and exactly that many bytes of worker source from
stdin, echoes their sha256 (transport integrity only: the proof is the mathematics), and execs the
source as ``__main__``. The validator then speaks the worker protocol (info -> commit -> open)
with a bounded line reader and a timeout on every read, and times ``commit`` on its own monotonic
clock: from right before the challenge line is written until the commitment line has arrived. The
in-depth ops (docs/pog-depth.md) stream intermediate lines: each ``memory_pass`` and ``segment``
line is stamped on arrival, and out-of-order or foreign lines are protocol errors. Every line is
parsed by ``worker_reply``: malformed output of any kind is a ``WorkerProtocolError``, never an
exception out of the parser.

The host key is pinned to the one the lease reported; nothing is ever auto-accepted. This module
does not verify proofs or score anything: it returns parsed wire models and timings.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import shlex
import time
from dataclasses import dataclass
from typing import Protocol

import asyncssh

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
# fleet benchmark saw chacha20 take 28 % of the validator's event-loop CPU (docs/benchmarks.md).
CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"
SMALL_LINE = 1 << 16
_STDERR_TAIL = 2000


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
    """One running worker; use ``async with await PogSession.open(...)`` or call ``close``."""

    def __init__(self, conn: asyncssh.SSHClientConnection, process: asyncssh.SSHClientProcess) -> None:
        self._conn = conn
        self._process = process
        self._buffer = bytearray()
        self._scanned = 0  # bytes at the start of the buffer known to hold no newline
        self._stderr = bytearray()
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

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
    ) -> PogSession:
        """Connect with the per-round key, pin ``host_key``, start the worker, check the digest."""
        try:
            pinned = asyncssh.import_public_key(host_key.strip())
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise SshFailed(f"lease host key does not parse: {exc}") from None
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    host,
                    port,
                    username=username,
                    client_keys=[client_key],
                    known_hosts=([pinned], [], []),
                    agent_path=None,
                    config=(),
                    connect_timeout=timeout,
                    encryption_algs=CIPHERS,
                ),
                timeout,
            )
        except asyncio.TimeoutError:
            raise SshFailed(f"ssh connect to {host}:{port} timed out after {timeout:.0f}s") from None
        except (OSError, asyncssh.Error) as exc:
            raise SshFailed(f"ssh connect to {host}:{port} failed: {exc}") from None
        try:
            process = await asyncio.wait_for(
                conn.create_process(bootstrap_command(device), encoding=None), timeout
            )
        except (asyncio.TimeoutError, OSError, asyncssh.Error) as exc:
            conn.close()
            raise SshFailed(f"could not start the worker: {exc or 'timeout'}") from None
        session = cls(conn, process)
        try:
            await session._upload(timeout)
        except BaseException:
            await session.close()
            raise
        return session

    async def _upload(self, timeout: float) -> None:
        source, digest = worker_script()
        payload = source.encode("utf-8")
        try:
            self._process.stdin.write(b"%d\n" % len(payload) + payload)
            echoed = (await self._read_line(SMALL_LINE, timeout)).strip().decode("ascii", "replace")
        except (OSError, asyncssh.Error) as exc:  # BrokenPipeError: the channel closed under the upload
            raise ChannelBroken(f"worker upload: channel broke ({type(exc).__name__}: {exc})") from None
        except WorkerProtocolError as exc:  # the command ended before it echoed the digest
            raise ChannelBroken(f"worker upload: {exc}") from None
        if echoed != digest:
            raise WorkerProtocolError(f"worker upload digest mismatch: got {echoed[:80]!r}")

    async def _drain_stderr(self) -> None:
        try:
            while chunk := await self._process.stderr.read(4096):
                self._stderr = (self._stderr + chunk)[-_STDERR_TAIL:]
        except (asyncssh.Error, OSError):
            pass

    @property
    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    async def _read_line(self, limit: int, timeout: float) -> bytes | bytearray:
        try:
            return await asyncio.wait_for(self._read_line_unbounded_time(limit), timeout)
        except asyncio.TimeoutError:
            raise WorkerTimeout(f"worker silent for {timeout:.1f}s") from None

    async def _read_line_unbounded_time(self, limit: int) -> bytes | bytearray:
        """The next line; each byte is scanned for the newline once (a 38 MB memory opening arrives in
        ~600 chunks: rescanning the buffer per chunk cost ~2 s of the event loop), and a line that is
        the whole buffer is handed over without a copy."""
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                self._scanned = 0
                if end + 1 == len(self._buffer):
                    whole, self._buffer = self._buffer, bytearray()
                    return whole
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            self._scanned = len(self._buffer)
            if len(self._buffer) > limit:
                raise WorkerProtocolError(f"worker line longer than {limit} bytes")
            try:
                chunk = await self._process.stdout.read(1 << 16)
            except (asyncssh.Error, OSError) as exc:
                raise WorkerProtocolError(f"worker channel failed: {exc}") from None
            if not chunk:
                tail = self.stderr_tail.strip().splitlines()[-1:] or ["no stderr"]
                raise WorkerProtocolError(f"worker exited ({tail[0][:200]})")
            self._buffer += chunk

    async def _request(self, message: dict, op: str, limit: int, timeout: float) -> dict:
        self._send(message)
        return _parse_reply(await self._read_line(limit, timeout), op)

    def _send(self, message: dict) -> None:
        self._process.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    async def info(self, timeout: float) -> list[DeviceInfo]:
        reply = await self._request({"op": "info"}, "info", SMALL_LINE, timeout)
        return parse_devices(reply)

    async def warm_up(self, challenge: Challenge, timeout: float) -> None:
        """Let the worker run a throwaway product at the coming challenge's shape, off the clock.

        Only the shape travels: the key and id are fresh random values, so nothing of the real
        challenge is known before ``commit`` starts the clock. A worker that refuses only loses
        its own warm-up (the timed commit is then slower), so a refusal is not an error.
        """
        shape = challenge.model_copy(
            update={"key": secrets.token_hex(16), "challenge_id": secrets.token_hex(16)}
        )
        try:
            await self._request(
                {"op": "warmup", "challenge": shape.model_dump(mode="json")}, "warmup", SMALL_LINE, timeout
            )
        except WorkerProtocolError as exc:
            log.debug("worker warm-up refused: %s", exc)

    async def commit(self, challenge: Challenge, timeout: float) -> TimedCommitment:
        """Send the challenge and time the round trip to the commitment on the validator's clock."""
        line = json.dumps({"op": "commit", "challenge": challenge.model_dump(mode="json")}).encode() + b"\n"
        started = time.monotonic()
        self._process.stdin.write(line)
        raw = await self._read_line(SMALL_LINE, timeout)
        elapsed = time.monotonic() - started
        reply = _parse_reply(raw, "commit")
        commitment = _model(Commitment, reply.get("commitment"), "commit")
        if commitment.challenge_id != challenge.challenge_id:
            raise WorkerProtocolError("commit: commitment is for another challenge")
        if len(commitment.roots) != challenge.gpu_count:
            raise WorkerProtocolError(f"commit: {len(commitment.roots)} roots for {challenge.gpu_count} GPUs")
        return TimedCommitment(commitment, elapsed)

    async def request_line(self, message: dict, limit: int, timeout: float) -> bytes | bytearray:
        """Send ``message``; its reply line unparsed. For the big replies (openings), which are parsed
        and verified off the event loop (``compute.pog.offload``, ``verify_pool``)."""
        self._send(message)
        return await self._read_line(limit, timeout)

    async def open_rows_line(self, request: OpeningRequest, p: int, timeout: float) -> bytes | bytearray:
        """The ``open`` reply line for ``request``, unparsed (see ``request_line``)."""
        message = {"op": "open", "request": request.model_dump(mode="json")}
        return await self.request_line(message, opening_line_limit(request, p), timeout)

    async def open_rows(self, request: OpeningRequest, p: int, timeout: float) -> Opening:
        reply = await self._request(
            {"op": "open", "request": request.model_dump(mode="json")},
            "open",
            opening_line_limit(request, p),
            timeout,
        )
        return _model(Opening, reply.get("opening"), "open")

    # ------------------------------------------------------------ in-depth proofs (docs/pog-depth.md)

    async def commit_on(self, challenge: Challenge, device: int, timeout: float) -> TimedCommitment:
        """A one-GPU challenge on ``device`` alone, timed like ``commit`` (open it with ``open_rows``)."""
        line = {"op": "commit_on", "device": device, "challenge": challenge.model_dump(mode="json")}
        started = time.monotonic()
        self._send(line)
        reply = _parse_reply(await self._read_line(SMALL_LINE, timeout), "commit_on")
        elapsed = time.monotonic() - started
        commitment = _model(Commitment, reply.get("commitment"), "commit_on")
        if commitment.challenge_id != challenge.challenge_id or len(commitment.roots) != 1:
            raise WorkerProtocolError("commit_on: commitment is for another challenge")
        return TimedCommitment(commitment, elapsed)

    async def memory_commit(
        self, challenge: MemoryChallenge, timeout: float, slot: str = "memory", gate: MemoryGate | None = None
    ) -> TimedMemory:
        """Build A (``memory_build``), then send the start nonce (``memory_commit``) and stamp every
        ``memory_pass`` line per GPU on arrival; the chain cannot begin before the start is sent.
        ``slot="ram"``: the same proof resident in host memory (``ram_build``, ``ram_commit``).
        ``gate``: a lockstep window's gates, awaited before the build and before the start."""
        gpus, passes, build, commit = challenge.gpu_count, challenge.passes, f"{slot}_build", f"{slot}_commit"
        if gate is not None:
            await gate.before_build()
        sent_at = time.monotonic()
        ready = await self._request(
            {"op": build, "challenge": challenge.build_message()},
            build,
            SMALL_LINE,
            timeout,
        )
        build_s = time.monotonic() - sent_at
        if (
            not isinstance(ready.get("ready"), dict)
            or ready["ready"].get("challenge_id") != challenge.challenge_id
        ):
            raise WorkerProtocolError(f"{build}: reply is for another challenge")
        arrivals: list[list[float]] = [[] for _ in range(gpus)]
        if gate is not None:
            await gate.before_start()
        self._send({"op": commit, "request": challenge.start_message()})
        started = time.monotonic()
        if gate is not None:
            gate.started(started)
        while True:
            raw = await self._read_line(SMALL_LINE + gpus * passes * 80, timeout)
            now = time.monotonic()
            line = _parse_json(raw, commit)
            if line.get("op") == commit:
                break
            gpu = line.get("gpu")
            if (
                line.get("ok") is not True
                or not isinstance(gpu, int)
                or isinstance(gpu, bool)
                or not 0 <= gpu < gpus
            ):
                _parse_reply(raw, commit)  # raises the worker's error, or a protocol error
                raise WorkerProtocolError(f"{commit}: unexpected line {raw[:80]!r}")
            if line.get("op") == "memory_pass" and line.get("pass") == len(arrivals[gpu]) + 1 <= passes:
                arrivals[gpu].append(now)
            else:
                raise WorkerProtocolError(f"{commit}: out-of-order line {raw[:80]!r}")
        reply = _parse_reply(raw, commit)
        commitment = _model(MemoryCommitment, reply.get("commitment"), commit)
        if commitment.challenge_id != challenge.challenge_id:
            raise WorkerProtocolError(f"{commit}: commitment is for another challenge")
        return TimedMemory(commitment, arrivals, time.monotonic() - started, started, build_s)

    async def memory_open_line(
        self, request: MemoryOpenRequest, n: int, timeout: float, slot: str = "memory"
    ) -> bytes | bytearray:
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
        return _model(MemoryOpening, reply.get("opening"), op)

    async def sustained(self, segments: list[Challenge], timeout: float) -> TimedSeries:
        """Run segments back to back; ``timeout`` bounds the silence between two segment lines."""
        self._send({"op": "sustained", "segments": [c.model_dump(mode="json") for c in segments]})
        sent_at = time.monotonic()
        arrivals: list[float] = []
        commitments: list[Commitment] = []
        while True:
            raw = await self._read_line(SMALL_LINE, timeout)
            now = time.monotonic()
            line = _parse_json(raw, "sustained")
            if line.get("op") != "segment":
                break
            if (
                line.get("ok") is not True
                or line.get("index") != len(arrivals)
                or len(arrivals) >= len(segments)
            ):
                raise WorkerProtocolError(f"sustained: unexpected segment line {raw[:80]!r}")
            commitment = _model(Commitment, line.get("commitment"), "sustained")
            if commitment.challenge_id != segments[len(arrivals)].challenge_id:
                raise WorkerProtocolError("sustained: segment commitment is for another challenge")
            arrivals.append(now)
            commitments.append(commitment)
        _parse_reply(raw, "sustained")
        if len(arrivals) != len(segments):
            raise WorkerProtocolError(f"sustained: {len(arrivals)} segments for {len(segments)} sent")
        return TimedSeries(sent_at, arrivals, commitments)

    async def sustained_open_line(
        self, index: int, request: OpeningRequest, p: int, timeout: float
    ) -> bytes | bytearray:
        """The ``sustained_open`` reply line, unparsed (see ``request_line``)."""
        message = {"op": "sustained_open", "index": index, "request": request.model_dump(mode="json")}
        return await self.request_line(message, opening_line_limit(request, p), timeout)

    async def sustained_open(self, index: int, request: OpeningRequest, p: int, timeout: float) -> Opening:
        reply = await self._request(
            {"op": "sustained_open", "index": index, "request": request.model_dump(mode="json")},
            "sustained_open",
            opening_line_limit(request, p),
            timeout,
        )
        return _model(Opening, reply.get("opening"), "sustained_open")

    async def probe(
        self, request: dict, timeout: float, op: str = "probe", limit: int = SMALL_LINE
    ) -> tuple[dict, float]:
        """One host probe (``probe``: CPU; ``disk_write``, ``disk_read``); returns (result, seconds on
        the validator's clock)."""
        started = time.monotonic()
        reply = await self._request({"op": op, "request": request}, op, limit, timeout)
        elapsed = time.monotonic() - started
        result = reply.get("result")
        if not isinstance(result, dict):
            raise WorkerProtocolError(f"{op}: result is not an object")
        return result, elapsed

    async def close(self) -> None:
        """Ask the worker to exit, then tear the connection down (never raises, never hangs)."""
        try:
            self._send({"op": "exit"})
            self._process.stdin.write_eof()
        except (asyncssh.Error, OSError):
            pass
        self._process.close()
        self._conn.close()
        self._stderr_task.cancel()
        try:
            await asyncio.wait_for(self._conn.wait_closed(), 5)
        except (asyncio.TimeoutError, asyncssh.Error, OSError):
            pass

    async def __aenter__(self) -> PogSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = [
    "BOOTSTRAP",
    "ChannelBroken",
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
