"""One seat's gates around its memory proof: the ``LockstepGate`` that ``prove_memory`` awaits.

``before_build`` arrives at the window's ``prepared`` gate (declaring how long the build may take),
``before_start`` at ``built`` (declaring the chain's bound), ``started`` records when the start nonce
was written and ``chained`` arrives at ``chained``. A gate that fell without this seat raises
``MinerAbsent`` (a ``MinerFailed``): the miner was not ready in time and is absent for the window.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import TypeVar

from compute.validator.failures import MinerFailed
from compute.validator.lockstep.window import Seat, SeatLate

T = TypeVar("T")


class MinerAbsent(MinerFailed):
    """Not ready when the window's gate fell: absent for this window (it only loses)."""


class SeatGate:
    def __init__(self, seat: Seat) -> None:
        self.seat = seat
        self.build_s = 0.0
        self.chain_s = 0.0

    def expect(self, build_s: float, chain_s: float) -> None:
        self.build_s, self.chain_s = build_s, chain_s

    async def _arrive(self, gate: str, bound_s: float) -> None:
        try:
            await self.seat.arrive(gate, bound_s)
        except SeatLate as exc:
            raise MinerAbsent(f"absent from the lockstep window: {exc}") from None

    async def before_build(self) -> None:
        await self._arrive("prepared", self.build_s)

    async def before_start(self) -> None:
        await self._arrive("built", self.chain_s)

    def started(self, at: float) -> None:
        self.seat.mark_started(at)

    async def chained(self) -> None:
        await self._arrive("chained", 0.0)

    async def guard(self, step: Awaitable[T]) -> T:
        """``step`` (the memory proof's build and chain), given up as soon as a gate falls without
        this seat, or once the chain has run its bound past the start (a seat whose chain has not
        ended by then was not resident at the window's moment; it is not awaited to its timeout)."""
        task = asyncio.ensure_future(step)
        dropped = asyncio.ensure_future(self.seat.dropped.wait())
        try:
            while True:
                started = self.seat.started_at
                wait = 0.5 if started is None else max(0.0, started + self.chain_s - time.monotonic())
                await asyncio.wait({task, dropped}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                if task.done():
                    return task.result()
                if dropped.done():
                    raise MinerAbsent(
                        f"absent from the lockstep window: not {self.seat.late_at} when the window's gate fell"
                    )
                if started is not None and time.monotonic() >= started + self.chain_s:
                    raise MinerAbsent(
                        f"not present at the lockstep window's moment: its chain had not ended "
                        f"{self.chain_s:.0f}s after the start"
                    )
        finally:
            dropped.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


__all__ = ["MinerAbsent", "SeatGate"]
