"""The validator's timing process: every lease's SSH session, its I/O stamped where nothing else runs.

Run as a script (``python clock_child.py FD [SPOOL_DIR]``) by ``compute.validator.session.clock``, never imported
by the validator at run time: it imports only the standard library and asyncssh, so no work of the
validator process (the dashboard, parsing and verifying openings, the chain, the store) can delay
it, GIL included. The parent speaks to it over the inherited UNIX socket ``FD`` in frames:
``<II`` (header length, payload length), a JSON header, raw payload bytes.

Requests (header ``op``; every answer echoes ``id``, ``ok`` and on failure ``kind``/``error``/``stderr``):

- ``open``: connect to ``host:port`` (through the ``proxy`` command's stdin/stdout when given; the ``ciphers`` asked first) as
  ``username`` with the private ``key`` (OpenSSH text), pin ``host_key``, run ``command``, write the payload (the worker upload) and answer with the first
  line (the echoed digest).
- ``request``: write the payload (one request line) to session ``sid``, stamping ``sent_at`` on this
  process's monotonic clock right before the write, then read one line, or with ``stream`` the lines
  ``{"op": stream, "ok": true, ...}`` up to the first other line (at most ``max_lines``), each
  stamped when the packet holding its last byte was decrypted (in asyncssh's ``data_received``
  callback, before any other task runs). Answer: ``sent_at``, ``stamps``, ``sizes``; payload: the lines.
  With ``spool``, a line that grows past ``SPOOL_MIN`` bytes is written, chunk by chunk as it arrives,
  to a new file of the spool directory (``FD``'s second argument, ``compute.pog.spool``) instead of
  memory; the answer names it in ``spooled`` (a path or null per line) and the payload leaves it out.
  The validator then owns the file. A line refused (past ``limit``), cut off (the channel broke, the
  command ended) or never asked for (the session closed) has its file deleted here; the whole
  directory goes when the validator does.
- ``send``: write the payload, read nothing. ``close``: ask the worker to exit, drop the session.

Failure kinds: ``ssh`` (connect, host key, start), ``channel`` (a write or read on the channel
broke), ``eof`` (the command ended), ``timeout`` (silent past ``timeout`` s), ``protocol`` (a line
longer than ``limit``), ``clock`` (this process's own trouble, e.g. the spool full). CLOCK_MONOTONIC is system-wide: stamps compare with the parent's clock.
It parses only small lines (to find a stream's end); it judges nothing; it never holds a spooled line.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Awaitable
from typing import TypeVar

import asyncssh

FRAME = struct.Struct("<II")
SMALL_LINE = 1 << 16
STDERR_TAIL = 2000
T = TypeVar("T")
TIE_S = 1e-6  # lines that arrived in one packet are stamped 1 us apart, in order
SPOOL_MIN = 1 << 20  # with ``spool``, a line past this many bytes continues in a file of the spool
NICE = -10  # ahead of the validator's own work and of everything else at nice 0, where permitted


class Failure(Exception):
    def __init__(self, kind: str, error: str, stderr: str = "") -> None:
        super().__init__(error)
        self.kind, self.error, self.stderr = kind, error, stderr


class SpoolError(Exception):
    """Writing a spool file failed (tmpfs full, the directory gone): the validator's trouble."""


class Spooled:
    """A complete line in a spool file (its holder deletes it)."""

    def __init__(self, path: str, size: int) -> None:
        self.path, self.size = path, size

    def discard(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


Line = bytes | Spooled


def _discard(items: list) -> None:
    for item in items:
        if isinstance(item, Spooled):
            item.discard()


class Partial:
    """The line being received: in memory, or -- with ``spool`` and past ``SPOOL_MIN`` bytes -- in a
    new file of ``spool_dir``, each chunk written as it arrives (tmpfs: a copy, no disk wait)."""

    def __init__(self, spool_dir: str | None) -> None:
        self.spool_dir = spool_dir
        self.buffer = bytearray()
        self.fd: int | None = None
        self.path = ""
        self.size = 0

    def add(self, data: bytes, spool: bool) -> None:
        self.size += len(data)
        if self.fd is not None:
            self._write(data)
            return
        self.buffer += data
        if spool and self.spool_dir is not None and len(self.buffer) > SPOOL_MIN:
            try:
                self.fd, self.path = tempfile.mkstemp(prefix="line-", dir=self.spool_dir)
            except OSError as exc:
                raise SpoolError(f"cannot create a spool file: {exc}") from None
            self._write(self.buffer)
            self.buffer = bytearray()

    def _write(self, data: bytes | bytearray) -> None:
        assert self.fd is not None
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as exc:
            raise SpoolError(f"spool write failed: {exc}") from None

    def finish(self, data: bytes) -> Line:
        """The line completed by ``data`` (its newline included); the partial starts over."""
        if self.fd is None:
            if not self.buffer:
                line = data
            else:
                self.buffer += data
                line = bytes(self.buffer)
                self.buffer = bytearray()
            self.size = 0
            return line
        self._write(data)
        os.close(self.fd)
        spooled = Spooled(self.path, self.size + len(data))
        self.fd, self.path, self.size = None, "", 0
        return spooled

    def discard(self) -> None:
        """Drop an unfinished line (its file too)."""
        if self.fd is not None:
            os.close(self.fd)
            Spooled(self.path, 0).discard()
            self.fd, self.path = None, ""
        self.buffer, self.size = bytearray(), 0


class Channel(asyncssh.SSHClientSession[bytes]):
    """One worker session. Its stdout is stamped and split in asyncssh's own callback
    (``data_received``), the moment each packet is decrypted: no task hop, no queue of other
    callbacks between the bytes and their stamp."""

    def __init__(self, spool_dir: str | None = None) -> None:
        self.conn: asyncssh.SSHClientConnection | None = None
        self.chan: asyncssh.SSHClientChannel | None = None
        self.limit = SMALL_LINE
        self.spool = False  # set per request: big lines of this one go to files of ``spool_dir``
        self.partial = Partial(spool_dir)
        self.lines: asyncio.Queue[tuple[float, Line] | Failure] = asyncio.Queue()
        self.stderr = bytearray()
        self.failed = False
        # the last line's stamp: several packets of one read are delivered microseconds apart, so a
        # packet's clock can sit below the previous packet's tie-broken stamps; stamps never go back
        self.last_stamp = -math.inf

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        # the arrival of every line this packet completes (never before the previous line's stamp:
        # only ever microseconds late, so the memory judge always sees ordered arrivals)
        now = max(time.monotonic(), self.last_stamp + TIE_S)
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            self.stderr = (self.stderr + data)[-STDERR_TAIL:]
            return
        if self.failed:
            return
        try:
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                self.lines.put_nowait((now, self.partial.finish(data[start : end + 1])))
                self.last_stamp = now
                now += TIE_S  # lines of one packet keep their order on the clock
                start = end + 1
            if start < len(data):
                self.partial.add(data[start:], self.spool)
            if self.partial.size > self.limit:
                self._fail(Failure("protocol", f"worker line longer than {self.limit} bytes"))
        except SpoolError as exc:
            self._fail(Failure("clock", str(exc)))

    def eof_received(self) -> bool:
        self._fail(Failure("eof", "worker exited", self.tail()))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            self._fail(Failure("eof", "worker exited", self.tail()))
        else:
            self._fail(Failure("channel", f"worker channel failed: {exc}", self.tail()))

    def _fail(self, failure: Failure) -> None:
        """The channel stops here: a half-received line (its spool file too) is dropped."""
        if not self.failed:
            self.failed = True
            self.partial.discard()
            self.lines.put_nowait(failure)

    def tail(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def write(self, data: bytes) -> float:
        """Write ``data``; the stamp taken right before it leaves."""
        now = time.monotonic()
        try:
            assert self.chan is not None
            self.chan.write(data)
        except (asyncssh.Error, OSError) as exc:  # BrokenPipeError: the channel closed
            raise Failure("channel", f"channel broke ({type(exc).__name__}: {exc})", self.tail()) from None
        return now

    async def line(self, timeout: float) -> tuple[float, Line]:
        if not self.lines.empty():  # already stamped: no timer at all
            item = self.lines.get_nowait()
        else:
            try:
                item = await _within(self.lines.get(), timeout)
            except asyncio.TimeoutError:
                raise Failure("timeout", f"worker silent for {timeout:.1f}s") from None
        if isinstance(item, Failure):
            self.lines.put_nowait(item)  # the channel stays failed for later requests
            if item.kind == "eof":
                item.stderr = self.tail()
            raise item
        return item

    async def close(self) -> None:
        if self.chan is not None:
            try:
                self.chan.write(b'{"op":"exit"}\n')
                self.chan.write_eof()
            except (asyncssh.Error, OSError):
                pass
            self.chan.close()
        self._fail(Failure("channel", "session is closed"))
        while not self.lines.empty():  # lines nobody asked for: their files go now
            _discard([self.lines.get_nowait()])
        if self.conn is not None:
            self.conn.close()
            try:
                await asyncio.wait_for(self.conn.wait_closed(), 5)
            except (asyncio.TimeoutError, asyncssh.Error, OSError):
                pass


async def _within(awaitable: Awaitable[T], timeout: float) -> T:
    """``awaitable`` within ``timeout`` seconds, on a timer of the calling task (``asyncio.timeout``,
    Python 3.11+) instead of ``wait_for``'s new task per call: a 256-pass chain on 8 GPUs is 2,048
    lines of one request, each awaited here (23 -> 10 us of CPU per line)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await awaitable
    return await asyncio.wait_for(awaitable, timeout)  # pragma: no cover - Python 3.10


def _continues(raw: Line, stream: str) -> bool:
    """Whether ``raw`` is one more ``stream`` line (small, ``ok``, that op); anything else ends it."""
    if isinstance(raw, Spooled) or len(raw) > SMALL_LINE:
        return False
    try:
        line = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(line, dict) and line.get("ok") is True and line.get("op") == stream


class Clock:
    def __init__(self, sock: socket.socket, spool_dir: str | None = None) -> None:
        self.sock = sock
        self.spool_dir = spool_dir
        self.channels: dict[str, Channel] = {}
        self.writer: asyncio.StreamWriter | None = None

    async def serve(self) -> None:
        reader, self.writer = await asyncio.open_unix_connection(sock=self.sock, limit=1 << 20)
        running: set[asyncio.Task] = set()
        while True:
            try:
                sizes = await reader.readexactly(FRAME.size)
                head, size = FRAME.unpack(sizes)
                header = json.loads(await reader.readexactly(head))
                payload = await reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                break  # the validator went away: so do its sessions
            task = asyncio.ensure_future(self.answer(header, payload))
            running.add(task)
            task.add_done_callback(running.discard)
        for channel in list(self.channels.values()):
            await channel.close()

    async def answer(self, header: dict, payload: bytes) -> None:
        reply: dict = {"id": header.get("id"), "ok": True}
        body = b""
        try:
            body = await self.handle(header, payload, reply)
        except Failure as exc:
            reply.update(ok=False, kind=exc.kind, error=exc.error, stderr=exc.stderr)
        except Exception as exc:  # noqa: BLE001 - the request boundary: the parent gets the reason
            reply.update(ok=False, kind="clock", error=f"{type(exc).__name__}: {exc}")
        data = json.dumps(reply).encode()
        assert self.writer is not None
        self.writer.write(FRAME.pack(len(data), len(body)) + data + body)
        await self.writer.drain()

    async def handle(self, header: dict, payload: bytes, reply: dict) -> bytes:
        op = header["op"]
        if op == "open":
            return await self.open(header, payload)
        channel = self.channels.get(header["sid"])
        if channel is None:
            raise Failure("channel", "session is closed")
        if op == "close":
            del self.channels[header["sid"]]
            await channel.close()
            return b""
        channel.limit = int(header.get("limit", SMALL_LINE))
        channel.spool = bool(header.get("spool"))
        reply["sent_at"] = channel.write(payload) if payload else time.monotonic()
        if op == "send":
            return b""
        timeout, stream = float(header["timeout"]), header.get("stream")
        stamps: list[float] = []
        lines: list[Line] = []
        try:
            while True:
                stamp, raw = await channel.line(timeout)
                stamps.append(stamp)
                lines.append(raw)
                if not stream or not _continues(raw, stream) or len(lines) > int(header["max_lines"]):
                    break
        except BaseException:
            _discard(lines)  # a failed request hands over no file: nobody would delete it
            raise
        reply.update(stamps=stamps, sizes=[_size(raw) for raw in lines])
        if any(isinstance(raw, Spooled) for raw in lines):
            reply["spooled"] = [raw.path if isinstance(raw, Spooled) else None for raw in lines]
        return b"".join(raw for raw in lines if isinstance(raw, bytes))

    async def open(self, header: dict, payload: bytes) -> bytes:
        timeout = float(header["timeout"])
        try:
            pinned = asyncssh.import_public_key(header["host_key"].strip())
            key = asyncssh.import_private_key(header["key"])
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise Failure("ssh", f"lease host key does not parse: {exc}") from None
        host, port = header["host"], int(header["port"])
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    host,
                    port,
                    username=header["username"],
                    client_keys=[key],
                    known_hosts=([pinned], [], []),
                    agent_path=None,
                    config=(),
                    connect_timeout=timeout,
                    proxy_command=header.get("proxy") or (),
                    encryption_algs=header.get("ciphers") or (),
                ),
                timeout,
            )
        except asyncio.TimeoutError:
            raise Failure("ssh", f"ssh connect to {host}:{port} timed out after {timeout:.0f}s") from None
        except (OSError, asyncssh.Error) as exc:
            raise Failure("ssh", f"ssh connect to {host}:{port} failed: {exc}") from None
        channel = Channel(self.spool_dir)
        channel.conn = conn
        try:
            channel.chan, _ = await asyncio.wait_for(
                conn.create_session(lambda: channel, header["command"], encoding=None), timeout
            )
        except (asyncio.TimeoutError, OSError, asyncssh.Error) as exc:
            conn.close()
            raise Failure("ssh", f"could not start the worker: {exc or 'timeout'}") from None
        try:
            channel.write(payload)
            _, first = await channel.line(timeout)
        except Failure:
            await channel.close()
            raise
        self.channels[header["sid"]] = channel
        assert isinstance(first, bytes)  # nothing is spooled before a request asks for it
        return first


def _size(raw: Line) -> int:
    return raw.size if isinstance(raw, Spooled) else len(raw)


def raise_priority(nice: int = NICE) -> None:
    """Run ahead of ordinary work where the OS allows it (root or CAP_SYS_NICE), so a packet waits
    for a core behind raised tasks only, not behind the validator's verifying, the dashboard or a
    neighbour's build on a busy box; elsewhere the priority stays (the verify pool still runs below
    it, at nice +10)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        pass


def main() -> None:
    raise_priority()
    sock = socket.socket(fileno=int(sys.argv[1]))
    spool_dir = sys.argv[2] if len(sys.argv) > 2 else None
    try:
        asyncio.run(Clock(sock, spool_dir).serve())
    finally:  # the validator went away (or killed): its spool goes with this process
        if spool_dir is not None:
            shutil.rmtree(spool_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
