"""Connection-level defences of the signed server, below HTTP parsing and authentication.

A peer that never authenticates can still hold sockets, send headers or a body one byte at a
time, or open thousands of connections. This module bounds all of that before any handler runs:

- ``ConnectionGuard`` counts open connections, in total and per remote address, and refuses a
  new one over either cap with a bare ``503`` and a close (no task, no parsing). The last
  ``known_reserve`` slots are kept for *known* addresses (ones that recently sent a request the
  server authenticated and admitted), so a flood of strangers from many addresses cannot take the
  slots the validators connect with.
- ``fit_to_nofile`` sizes the caps against the process's open-file limit (which the miner first
  raises to its hard limit, ``raise_nofile_limit``), leaving room for everything else the process
  keeps open: a flood is refused by the caps, never by ``EMFILE`` ("Too many open files").
- ``guarded_protocol`` is uvicorn's h11 protocol with that guard and a header deadline: a
  connection must deliver complete request headers within ``header_timeout_s`` of opening (or
  of its previous response), else it is closed. The body deadline and the per-address cap on
  unauthenticated requests live in ``SignedServer`` (they need the request).
- ``RefusalLog`` turns refusals into one summary line per interval, and ``ThrottleFilter`` caps
  how many records per interval noisy loggers (``uvicorn.error``, ``asyncio``) may write, so a
  hostile peer cannot grow the log without bound.

What it deliberately does not do: know hotkeys or signatures (nothing here is authenticated).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from .ratelimit import RateLimiter

logger = logging.getLogger(__name__)
_REFUSED_503 = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


@dataclass(frozen=True)
class GuardLimits:
    """Connection caps and deadlines; the defaults let one address hold a modest share."""

    max_connections: int = 2048
    max_connections_per_ip: int = 128
    header_timeout_s: float = 10.0
    backlog: int = 2048
    connect_rate_per_ip: float = 10.0  # new connections per second per address (token bucket)
    connect_burst_per_ip: float = 50.0
    log_interval_s: float = 10.0
    known_reserve: int = 256  # slots only addresses that authenticated recently may take
    known_ttl_s: float = 3600.0  # how long an address stays known after its last admitted request
    max_known: int = 4096  # addresses remembered (least recently admitted forgotten first)


RESERVED_FDS = 512  # what the process keeps open besides API connections: stores, engines, leases, logs


def fit_to_nofile(limits: GuardLimits, nofile: int) -> GuardLimits:
    """``limits`` with caps that fit in ``nofile`` open files (``RESERVED_FDS`` kept for the rest)."""
    total = max(64, min(limits.max_connections, nofile - RESERVED_FDS))
    reserve = min(limits.known_reserve, total // 4)
    per_ip = min(limits.max_connections_per_ip, max(8, (total - reserve) // 16))
    return replace(
        limits,
        max_connections=total,
        known_reserve=reserve,
        max_connections_per_ip=per_ip,
        backlog=min(limits.backlog, total),
    )


def open_file_limit() -> int:
    """This process's soft ``RLIMIT_NOFILE``."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@dataclass
class RefusalLog:
    """Counts refusals by reason and address; writes one summary line per ``interval_s``."""

    interval_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    totals: Counter[str] = field(default_factory=Counter)  # since start, by reason (for tests, stats)
    _counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    _next: float = 0.0

    def note(self, reason: str, address: str) -> None:
        self.totals[reason] += 1
        self._counts[(reason, address)] += 1
        now = self.clock()
        if now >= self._next:
            self.flush()
            self._next = now + self.interval_s

    def flush(self) -> None:
        if not self._counts:
            return
        by_reason: Counter[str] = Counter()
        for (reason, _), count in self._counts.items():
            by_reason[reason] += count
        top = ", ".join(f"{addr} {reason} x{n}" for (reason, addr), n in self._counts.most_common(3))
        logger.warning(
            "refused %s in the last %.0fs (top: %s)",
            ", ".join(f"{n} {reason}" for reason, n in sorted(by_reason.items())),
            self.interval_s,
            top,
        )
        self._counts.clear()


class ConnectionGuard:
    """Open-connection bookkeeping shared by every protocol instance of one server (one loop)."""

    def __init__(self, limits: GuardLimits | None = None, refusals: RefusalLog | None = None) -> None:
        self.limits = limits or GuardLimits()
        self.refusals = refusals or RefusalLog(self.limits.log_interval_s)
        self.total = 0
        self.per_ip: Counter[str] = Counter()
        self.connects = RateLimiter(self.limits.connect_rate_per_ip, self.limits.connect_burst_per_ip)
        self.known: OrderedDict[str, float] = OrderedDict()  # address -> when it stops being known
        self.clock = time.monotonic
        # set by the server while unknown addresses hold all the unauthenticated requests they may:
        # a new connection from one of them is then refused here, before any parsing (the cheapest)
        self.strangers_full = False

    def trust(self, address: str) -> None:
        """``address`` sent a request that was authenticated and admitted: it may use the reserve."""
        self.known[address] = self.clock() + self.limits.known_ttl_s
        self.known.move_to_end(address)
        while len(self.known) > self.limits.max_known:
            self.known.popitem(last=False)

    def is_known(self, address: str) -> bool:
        until = self.known.get(address)
        if until is None:
            return False
        if until < self.clock():
            del self.known[address]
            return False
        return True

    def admit(self, address: str) -> bool:
        if self.connects.take(address) > 0:
            self.refusals.note("connections (per-address rate)", address)
            return False
        if self.total >= self.limits.max_connections:
            self.refusals.note("connections (server full)", address)
            return False
        stranger = not self.is_known(address)
        if stranger and self.total >= self.limits.max_connections - self.limits.known_reserve:
            self.refusals.note("connections (full for unknown addresses)", address)
            return False
        if stranger and self.strangers_full:
            self.refusals.note("connections (unauthenticated requests full)", address)
            return False
        if self.per_ip[address] >= self.limits.max_connections_per_ip:
            self.refusals.note("connections (per-address cap)", address)
            return False
        self.total += 1
        self.per_ip[address] += 1
        return True

    def release(self, address: str) -> None:
        self.total -= 1
        self.per_ip[address] -= 1
        if self.per_ip[address] <= 0:
            del self.per_ip[address]


def guarded_protocol(guard: ConnectionGuard) -> type[H11Protocol]:
    """uvicorn's h11 protocol class bound to ``guard`` (pass as ``uvicorn.Config(http=...)``)."""

    class GuardedH11Protocol(H11Protocol):
        _address = ""
        _admitted = False
        _header_timer: asyncio.TimerHandle | None = None
        _armed_cycle: Any = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            peer = transport.get_extra_info("peername")
            self._address = str(peer[0]) if peer else "?"
            if not guard.admit(self._address):
                transport.write(_REFUSED_503)
                transport.close()
                return
            self._admitted = True
            super().connection_made(transport)
            self._arm_header_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            if not self._admitted:
                return
            self._admitted = False
            guard.release(self._address)
            self._cancel_header_deadline()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not self._armed_cycle:
                self._cancel_header_deadline()  # complete headers arrived: the body deadline takes over

        def on_response_complete(self) -> None:
            self._arm_header_deadline()  # before super(): a pipelined request cancels it again
            super().on_response_complete()

        def _arm_header_deadline(self) -> None:
            self._cancel_header_deadline()
            self._armed_cycle = self.cycle
            self._header_timer = self.loop.call_later(guard.limits.header_timeout_s, self._header_expired)

        def _cancel_header_deadline(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_expired(self) -> None:
            self._header_timer = None
            if self.cycle is self._armed_cycle and not self.transport.is_closing():
                guard.refusals.note("connections (header deadline)", self._address)
                self.transport.close()

    return GuardedH11Protocol


class ThrottleFilter(logging.Filter):
    """Let at most ``per_interval`` records through per ``interval_s``; count and report the rest."""

    def __init__(self, per_interval: int = 20, interval_s: float = 10.0, one_line: bool = True) -> None:
        super().__init__()
        self.per_interval, self.interval_s, self.one_line = per_interval, interval_s, one_line
        self._window = 0.0
        self._passed = 0
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self._window >= self.interval_s:
            if self._dropped:
                record.msg = f"(suppressed {self._dropped} similar lines) {record.msg}"
            self._window, self._passed, self._dropped = now, 0, 0
        if self._passed >= self.per_interval:
            self._dropped += 1
            return False
        self._passed += 1
        if self.one_line:  # one line per event: a hostile peer earns no traceback
            record.exc_info = None
            record.exc_text = None
        return True


def throttle_noisy_loggers() -> None:
    """Cap ``uvicorn.error`` (one line each, what peers trigger) and ``asyncio`` (idempotent)."""
    for name, one_line in (("uvicorn.error", True), ("asyncio", False)):
        target = logging.getLogger(name)
        if not any(isinstance(f, ThrottleFilter) for f in target.filters):
            target.addFilter(ThrottleFilter(one_line=one_line))


def raise_nofile_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (``fs.nr_open`` when unlimited); returns
    (soft, hard). The hard limit is the operator's (pm2's shell, ``LimitNOFILE=`` of a unit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else _nr_open()
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            logger.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
    return soft, hard


def _nr_open() -> int:
    try:
        return int(open("/proc/sys/fs/nr_open").read())  # noqa: SIM115, PTH123 - one tiny read
    except (OSError, ValueError):
        return 1 << 20


__all__ = [
    "RESERVED_FDS",
    "ConnectionGuard",
    "GuardLimits",
    "fit_to_nofile",
    "open_file_limit",
    "RefusalLog",
    "ThrottleFilter",
    "guarded_protocol",
    "raise_nofile_limit",
    "throttle_noisy_loggers",
]
