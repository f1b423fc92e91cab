"""``ProofCheck``: what a proof takes from the test it runs in, as one argument.

The round's parameters (sizes, timeouts, the lockstep bounds, the verify workers, the distance
share), the GPU table and the miner's last verified result. ``compute.validator.check``'s
``MinerCheck`` is one; the proofs sit below that room, so they name only this shape.
"""

from __future__ import annotations

from typing import Protocol

from compute.scoring import GpuTable
from compute.store import PogResult
from compute.validator.params import RoundParams


class ProofCheck(Protocol):
    @property
    def params(self) -> RoundParams: ...

    @property
    def table(self) -> GpuTable: ...

    @property
    def previous(self) -> PogResult | None: ...


__all__ = ["ProofCheck"]
