"""The validator's side of its timing process (``clock_child``): start it, ask it, get stamped lines.

Why a process: the validator's event loop also serves the dashboard, parses and verifies openings
and talks to the chain; a page flood stalled it 199-589 ms and one 16-GPU memory opening took
155-338 ms to parse on it, and a thread would still wait for the GIL while
the same process parses a large line. The timing process holds every lease's SSH session and
stamps each line the moment its bytes arrive, on the system-wide monotonic clock; the validator
only reads the stamps afterwards, so nothing it does can move them.

``Clock.shared()`` is this process's one timing process, started on first use (a fresh one after
it died). ``await clock.call(header, payload)`` works from any event loop (a reader thread hands
each answer to the loop that asked). The process dies with its parent (its socket closes).
A failure of the timing process itself is ``ClockFailed``: the validator's trouble, never a
miner's answer. It neither parses worker replies nor judges anything (``pog_session`` does).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

from compute.pog.spool import SpooledLine, new_spool_dir, remove_spool_dir

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("clock_child.py")
_FRAME_SIZE = 8


class ClockFailed(Exception):
    """The validator's timing process failed or went away (not the miner's doing)."""


def _frame(header: dict, payload: bytes) -> bytes:
    data = json.dumps(header).encode()
    return len(data).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + data + payload


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    view = bytearray(size)
    got = 0
    while got < size:
        count = sock.recv_into(memoryview(view)[got:], size - got)
        if not count:
            raise ConnectionError("timing process closed its socket")
        got += count
    return bytes(view)


class Clock:
    """One timing process and the answers it owes (see the module docstring)."""

    _shared: ClassVar[Clock | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock = parent
        self.spool_dir = new_spool_dir()  # big lines land here (``spool``); removed by either end
        self._process = subprocess.Popen(
            [sys.executable, "-u", str(CHILD), str(child.fileno()), self.spool_dir],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        child.close()
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self.alive = True
        self._reader = threading.Thread(target=self._read_answers, name="clock-answers", daemon=True)
        self._reader.start()
        log.debug("timing process started pid=%d", self._process.pid)

    @classmethod
    def shared(cls) -> Clock:
        with cls._shared_lock:
            if cls._shared is None or not cls._shared.alive:
                cls._shared = cls()
                atexit.register(cls._shared.close)
            return cls._shared

    @property
    def pid(self) -> int:
        return self._process.pid

    async def call(self, header: dict, payload: bytes = b"") -> tuple[dict, bytes]:
        """Send one request; its answer (header, payload). Raises ``ClockFailed`` if the process died."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        with self._lock:
            if not self.alive:
                raise ClockFailed("the timing process is gone")
            ident = next(self._ids)
            self._pending[ident] = (loop, future)
        frame = _frame({**header, "id": ident}, payload)
        try:  # inline: the timing process reads its socket at once (frames are lines, or one upload)
            self._send(frame)
        except OSError as exc:
            self._fail(f"cannot reach the timing process: {exc}")
        return await future

    def _send(self, frame: bytes) -> None:
        with self._send_lock:
            self._sock.sendall(frame)

    def _read_answers(self) -> None:
        try:
            while True:
                sizes = _recv_exactly(self._sock, _FRAME_SIZE)
                head, size = int.from_bytes(sizes[:4], "little"), int.from_bytes(sizes[4:], "little")
                header = json.loads(_recv_exactly(self._sock, head))
                payload = _recv_exactly(self._sock, size) if size else b""
                with self._lock:
                    waiter = self._pending.pop(header.get("id"), None)
                if waiter is not None:
                    _resolve(waiter, (header, payload))
                else:  # nobody waits for this answer: its files would linger
                    _discard_spooled(header)
        except (OSError, ValueError) as exc:
            self._fail(f"timing process answer failed: {exc}")

    def _fail(self, reason: str, closing: bool = False) -> None:
        with self._lock:
            was_alive, self.alive = self.alive, False
            pending, self._pending = self._pending, {}
        if was_alive:
            log.log(logging.DEBUG if closing else logging.ERROR, "%s (code %s)", reason, self._process.poll())
        for waiter in pending.values():
            _resolve(waiter, ClockFailed(reason))

    def close(self) -> None:
        """Stop the timing process (its sessions close); idempotent."""
        self._fail("timing process closed", closing=True)
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()
        remove_spool_dir(self.spool_dir)


def spooled_lines(header: dict, payload: bytes) -> list[bytes | SpooledLine]:
    """The lines of a ``request`` answer: bytes, or ``SpooledLine`` where the timing process spooled
    one (``spooled``: a path or None per line). The caller owns (deletes) the spooled files."""
    paths = header.get("spooled") or [None] * len(header["sizes"])
    lines: list[bytes | SpooledLine] = []
    offset = 0
    for size, path in zip(header["sizes"], paths, strict=True):
        if path is not None:
            lines.append(SpooledLine(str(path), int(size)))
        else:
            lines.append(payload[offset : offset + size])
            offset += size
    return lines


def _discard_spooled(header: dict) -> None:
    for path in header.get("spooled") or ():
        if path is not None:
            SpooledLine(str(path), 0).discard()


def _resolve(waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future], value: object) -> None:
    loop, future = waiter

    def settle() -> None:
        if future.done():  # cancelled (a deadline passed): the answer's files are nobody's
            if isinstance(value, tuple):
                _discard_spooled(value[0])
            return
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the asking loop is closed: nobody waits for this answer any more
        if isinstance(value, tuple):
            _discard_spooled(value[0])


__all__ = ["CHILD", "Clock", "ClockFailed", "spooled_lines"]
