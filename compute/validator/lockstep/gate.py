"""One seat's gates around its memory proof: the ``LockstepGate`` that ``prove_memory`` awaits.

``before_build`` arrives at the window's ``prepared`` gate (declaring how long the build may take),
``before_start`` at ``built`` (declaring the chain's bound), ``started`` records when the start nonce
was written and ``chained`` arrives at ``chained``. A gate that fell without this seat raises
``MinerAbsent`` (a ``MinerFailed``): the miner was not ready in time and is absent for the window.
"""

from __future__ import annotations

from compute.validator.failures import MinerFailed
from compute.validator.lockstep.window import Seat, SeatLate


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


__all__ = ["MinerAbsent", "SeatGate"]
