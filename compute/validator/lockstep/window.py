"""A lockstep window: seats prepare untimed, then every seat builds, then every chain starts at once.

A window is opened with one seat per participant it expects (a miner; a multi-host miner forks one
seat per host before it arrives anywhere). Each seat passes three gates, in order:

- ``prepared``: lease, SSH, worker and info are done. The gate falls when every seat has arrived or
  left, or ``prepare_s`` after the window opened, whichever is first. When it falls the window takes
  the validator's *timed lock* (one timed phase at a time per validator: a round's window and a
  presence check never ask the same GPU for two resident matrices), then lets every seat build.
- ``built``: the resident matrix is built. Falls when every seat is built or left, or at the longest
  build bound the seats declared. Every seat then writes its start nonce at once: the window's
  common moment.
- ``chained``: the chain is done. Falls when every seat is done or left, or at the longest chain
  bound (a slower chain is not dropped: the time judge weighs it); then the timed lock is released
  and the common moment (the last start written) is known.

A seat that arrives at a gate after it fell is *late*: ``arrive`` raises ``SeatLate`` and the seat
is absent for the window (a miner that is not ready in time may only lose). A seat that fails leaves
(``leave``), and the others stop waiting for it. Waiting is on the validator's monotonic clock; the
window never waits for a miner longer than the bounds.

What it deliberately does not do: talk to miners, judge proofs or score (``residency`` judges).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

GATES = ("prepared", "built", "chained")


class SeatLate(Exception):
    """The seat reached a gate after it fell: absent for this window."""


class Seat:
    """One participant of a window (a miner's machine, or one host of a multi-host miner)."""

    def __init__(self, window: Window, name: str) -> None:
        self.window, self.name = window, name
        self.reached = 0  # gates arrived at
        self.gone = False  # left, or dropped as late
        self.late_at: str | None = None
        self.started_at: float | None = None  # the start nonce was written (validator clock)
        self.waited_s = 0.0  # seconds spent at gates waiting for the other seats (not the miner's time)
        self._waiting_since: float | None = None
        self.children: list[Seat] = []  # forked seats (hosts), waiting at the same gates at once
        self.dropped = asyncio.Event()  # set when a gate fell without this seat

    def fork(self, name: str) -> Seat:
        """Another seat for the same participant (a host); call before this seat arrives anywhere."""
        child = self.window.seat(name)
        self.children.append(child)
        return child

    async def arrive(self, gate: str, next_bound_s: float = 0.0) -> None:
        """Wait at ``gate`` until it falls (``SeatLate`` if it fell already, or fell without us).

        ``next_bound_s``: how long the next step may take this seat (the next gate waits for the
        longest one declared)."""
        await self.window._arrive(self, GATES.index(gate), next_bound_s)

    def leave(self) -> None:
        """This seat proves nothing more in the window (failed, rented, done early)."""
        if not self.gone:
            self.gone = True
            self.window._recheck()

    def mark_started(self, at: float) -> None:
        self.started_at = at

    def waited(self) -> float:
        """Seconds this seat has waited at gates so far (a wait in progress included)."""
        since = self._waiting_since
        own = self.waited_s + (self.window.clock() - since if since is not None else 0.0)
        return own + max((child.waited() for child in self.children), default=0.0)


class Window:
    """One window's gates (see the module docstring); ``async with`` closes it."""

    def __init__(
        self,
        label: str,
        *,
        prepare_s: float,
        timed_lock: asyncio.Lock | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.prepare_s, self.clock = label, prepare_s, clock
        self.timed_lock = timed_lock
        self.seats: list[Seat] = []
        self.fell_at: dict[str, float] = {}
        self._fallen = [asyncio.Event() for _ in GATES]
        self._go = asyncio.Event()  # the timed lock is held: seats may build
        self._bounds = [0.0 for _ in GATES]
        self._timers: list[asyncio.Task] = []
        self._holder: asyncio.Task | None = None
        self.opened_at = clock()

    def seat(self, name: str) -> Seat:
        if self._fallen[0].is_set():
            raise RuntimeError("a window takes no new seat once its first gate fell")
        seat = Seat(self, name)
        self.seats.append(seat)
        return seat

    def start(self) -> None:
        """Start the first gate's clock (call once every expected seat exists)."""
        self._timers.append(asyncio.create_task(self._deadline(0, self.prepare_s)))
        self._recheck()

    @property
    def moment(self) -> float | None:
        """The window's common moment: when the last start nonce was written."""
        starts = [s.started_at for s in self.seats if s.started_at is not None and not s.late_at]
        return max(starts) if starts else None

    def present(self) -> list[Seat]:
        return [s for s in self.seats if not s.late_at]

    async def _arrive(self, seat: Seat, gate: int, next_bound_s: float) -> None:
        last = gate == len(GATES) - 1
        if seat.late_at:
            raise SeatLate(f"not {seat.late_at} when the window's gate fell")
        if seat.gone:
            raise SeatLate(f"seat {seat.name} left the window")
        if last and self._fallen[gate].is_set():
            seat.reached = gate + 1  # a chain that ran long: the window stopped waiting, nothing more
            return
        if self._fallen[gate].is_set() or seat.reached != gate:
            self._drop(seat, GATES[gate])
            raise SeatLate(f"not {GATES[gate]} when the window's gate fell")
        seat.reached = gate + 1
        if gate + 1 < len(GATES):
            self._bounds[gate + 1] = max(self._bounds[gate + 1], next_bound_s)
        self._recheck()
        seat._waiting_since = arrived = self.clock()
        try:
            await self._fallen[gate].wait()
            if seat.late_at:
                raise SeatLate(f"not {seat.late_at} when the window's gate fell")
            if gate == 0:
                await self._go.wait()
        finally:
            seat.waited_s += self.clock() - arrived
            seat._waiting_since = None

    def _drop(self, seat: Seat, gate: str) -> None:
        if not seat.gone:
            seat.gone, seat.late_at = True, gate
            seat.dropped.set()
            log.info("window=%s seat=%s late: not %s when the gate fell", self.label, seat.name, gate)
            self._recheck()

    def _recheck(self) -> None:
        for gate, fallen in enumerate(self._fallen):
            if fallen.is_set():
                continue
            if gate > 0 and not self._fallen[gate - 1].is_set():
                return
            if all(s.gone or s.reached > gate for s in self.seats):
                self._fall(gate)
            return

    def _fall(self, gate: int) -> None:
        self.fell_at[GATES[gate]] = self.clock()
        self._fallen[gate].set()
        if gate == 0:
            self._holder = asyncio.create_task(self._hold_timed_lock())
        elif gate + 1 < len(GATES):
            self._timers.append(asyncio.create_task(self._deadline(gate + 1, self._bounds[gate + 1])))
        self._recheck()

    async def _hold_timed_lock(self) -> None:
        """The timed phase (builds and chains) under the validator's timed lock."""
        lock = self.timed_lock or asyncio.Lock()
        async with lock:
            self._go.set()
            self._timers.append(asyncio.create_task(self._deadline(1, self._bounds[1])))
            self._recheck()
            await self._fallen[-1].wait()

    async def _deadline(self, gate: int, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
        if self._fallen[gate].is_set():
            return
        for seat in self.seats:
            if not seat.gone and seat.reached <= gate and gate < len(GATES) - 1:
                self._drop(seat, GATES[gate])  # the last gate drops no one: it only stops waiting
        if not self._fallen[gate].is_set():
            self._fall(gate)

    async def close(self) -> None:
        """Drop whoever is still waiting and release the timed lock."""
        for seat in self.seats:
            seat.gone = True
        for gate, fallen in enumerate(self._fallen):
            if not fallen.is_set():
                self.fell_at.setdefault(GATES[gate], self.clock())
                fallen.set()
        self._go.set()
        for task in [*self._timers, *([self._holder] if self._holder else [])]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def __aenter__(self) -> Window:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["GATES", "Seat", "SeatLate", "Window"]
