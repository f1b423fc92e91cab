"""``MinerCheck``: one miner's test in one round, as one object every step takes.

What is tested (the target), with what (the signed client, the GPU table, the scoring config),
under which round (its parameters), against which past (the previous result) and what the test
has seen so far (notes): a step's own signature then says only what is particular to it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from compute.scoring import GpuTable, ScoringConfig
from compute.store import PogResult
from compute.transport import MinerClient
from compute.validator.lockstep.window import Seat
from compute.validator.params import MinerTarget, RoundParams, failed_result
from compute.validator.proofs.evidence import Measured, scored_result
from compute.validator.rentals.truth import MinerNotes


@dataclass
class MinerCheck:
    """One test of ``target`` in the round ``params`` (``check_miner`` runs each attempt on a copy
    of the one it is given; ``notes`` outlive retries)."""

    client: MinerClient
    target: MinerTarget
    params: RoundParams
    table: GpuTable
    scoring: ScoringConfig
    previous: PogResult | None = None
    notes: MinerNotes = field(default_factory=MinerNotes)
    started: float = field(default_factory=time.monotonic)  # monotonic, when this attempt began
    basis: PogResult | None = None  # the last verification of the WHOLE machine (see ``whole``)
    seat: Seat | None = None  # this test's seat in the round's lockstep window
    rtt_s: float = 0.0  # the round trip to the miner's API, measured by this test (specs)

    @property
    def uid(self) -> int:
        return self.target.uid

    async def call(self, request: BaseModel, timeout: float | None = None) -> Any:
        """``request`` to the miner under test (signed; its answer signed by the miner's hotkey)."""
        return await self.client.call(self.target.endpoint, self.target.hotkey, request, timeout=timeout)

    @property
    def whole(self) -> PogResult | None:
        """The miner's last verification of its whole machine: ``basis`` when given, else
        ``previous`` unless that one proved only the free GPUs of a partly rented machine."""
        if self.basis is not None:
            return self.basis
        previous = self.previous
        return previous if previous is not None and not previous.rented_fraction else None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def bound(self, step_s: float) -> float:
        """A prepare step's bound: ``step_s`` above twice the measured round trip (capped)."""
        return self.params.lockstep.after(step_s, self.rtt_s)

    def failed(self, reasons: tuple[str, ...], timings: dict | None = None) -> PogResult:
        """This test failed: ``ok`` False, sample 0, with its reasons."""
        return failed_result(self.target, self.params, reasons, timings)

    def scored(self, measured: Measured) -> PogResult:
        """The result of what this test measured (the value function over proven figures)."""
        return scored_result(self.target, self.params, measured, self.table, self.previous)
