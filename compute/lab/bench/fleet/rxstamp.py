"""Kernel receive stamps for the fleet benchmark's simulated miners (``SO_TIMESTAMPNS``).

The simulated miners' one process plays thousands of GPUs on the validator's own cores; when its
event loop is busy it reads a request late, and a prover that counts its hold from that late read
makes the validator's measured interval look longer than the device's by the simulation's own delay.
A ``StampingSocket`` notes, at every read, when the kernel received the bytes just read, so the
prover counts from the request's arrival: what is left of the difference is the validator's.

Benchmark-only: the validator's timing never reads these stamps (a miner's TCP stack controls which
segment a read ends on -- out of order, a pre-encrypted packet sent ahead -- so a kernel stamp of a
validator's read is not evidence of when a line arrived; the validator stamps in its own callback).
"""

from __future__ import annotations

import socket
import struct
import time
import weakref

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; SCM_TIMESTAMPNS has the same value
_TIMESPEC = struct.Struct("@qq")
_CMSG_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)

_open: weakref.WeakValueDictionary[int, StampingSocket] = weakref.WeakValueDictionary()


class StampingSocket(socket.socket):
    """A TCP socket whose ``recv`` keeps ``rx_at``: the kernel's receive time of the bytes last read,
    on this process's monotonic clock (never later than the read itself). A listening one hands out
    stamping connections."""

    rx_at: float | None = None

    def stamp_reads(self) -> None:
        self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        _open[self.fileno()] = self

    def accept(self) -> tuple[StampingSocket, object]:
        fd, address = self._accept()  # type: ignore[attr-defined]
        conn = StampingSocket(self.family, self.type, self.proto, fileno=fd)
        conn.stamp_reads()
        return conn, address

    def recv(self, size: int, flags: int = 0) -> bytes:
        data, ancillary, _, _ = self.recvmsg(size, _CMSG_SPACE, flags)
        self.rx_at = None  # a read without a stamp (the kernel turns stamping on lazily) says so
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
                seconds, nanoseconds = _TIMESPEC.unpack(raw[: _TIMESPEC.size])
                age_ns = time.time_ns() - (seconds * 1_000_000_000 + nanoseconds)
                self.rx_at = time.monotonic() - max(0, age_ns) / 1e9
        return data


def listening(host: str, port: int) -> StampingSocket:
    """A bound TCP listener whose accepted connections stamp their reads."""
    sock = StampingSocket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.stamp_reads()
    return sock


def received_at(transport_socket: object) -> float | None:
    """The kernel's receive time of the bytes last read on the connection behind ``transport_socket``
    (asyncio's wrapper, from ``get_extra_info("socket")``); None where reads are not stamped."""
    try:
        fd = transport_socket.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return None
    sock = _open.get(fd)
    return None if sock is None or sock.fileno() != fd else sock.rx_at  # (a closed one's fd reused)
