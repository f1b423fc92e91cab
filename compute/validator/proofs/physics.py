"""What one device at its claimed model's figures can do for two memory chains at once.

The residency judge (``compute.validator.lockstep.residency``) holds every prefix of a chain's
passes to a pace: pass j must arrive by ``moment + allowance + j x limit_s``. Whether that proves
the device served *only this chain* is a matter of capacity, which this module computes from the
figures the validator assumes (the claimed model's table bandwidth, the policy's fastest
regeneration rate and host link):

- a device reads its resident matrix once per ``pass_s`` (the table bandwidth), regenerates a
  matrix's worth once per ``regen_s`` and streams one from host memory once per ``stream_s``, all
  at the same time and in any mix (a chain may hold part of its matrix, regenerate the rest, hand
  the device over mid-chain, any number of times): at most ``1/pass_s + 1/regen_s + 1/stream_s``
  passes per second, over every chain it serves;
- two chains of ``passes`` passes each therefore need ``passes x shared_pass_s`` seconds at least,
  ``shared_pass_s = 2 / (1/pass_s + 1/regen_s + 1/stream_s)`` (the fluid bound: no cost for
  swapping matrices, which only makes a real device slower);
- the judge lets both finish by ``passes x limit_s + allowance``; so if ``allowance <
  passes x (shared_pass_s - limit_s)`` (``bound_s``) no device serves two chains that both pass.

``limit_s`` is one pass at ``resident_fraction`` of the table bandwidth (the slowest pace an honest
resident chain may keep), never slower than the memory time judge's own bound (regeneration / its
margin). The gap between ``limit_s`` and ``shared_pass_s`` is all there is: an honest device at 70 %
of its table bandwidth and two chains sharing one device differ by 0.07-0.37 of a pass per pass,
depending on the model (``table_bounds``), so the allowance a chain can be given grows only with
its length (``passes_for``).

Pure arithmetic; no clock, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SAFETY = 0.95  # the bound keeps 5 % below the capacity limit (the start nonces' write skew, rounding)


@dataclass(frozen=True)
class ChainPhysics:
    """One GPU's memory chain at the claimed model's figures (seconds per matrix)."""

    pass_s: float  # reading the resident matrix once at the table's bandwidth
    regen_s: float  # regenerating it once at the policy's fastest rate
    stream_s: float = math.inf  # streaming it once from host memory (inf: no host-link floor)
    limit_s: float = 0.0  # the slowest pass a resident chain may take (the judge's pace)

    @classmethod
    def of(
        cls,
        matrix_bytes: int,
        bandwidth_gbs: float,
        regen_s: float,
        host_gbs: float,
        fraction: float,
        margin: float,
    ) -> ChainPhysics:
        """A chain of ``matrix_bytes`` at ``bandwidth_gbs``: its pace is a pass at ``fraction`` of the
        bandwidth, at most ``regen_s / margin`` (the memory time judge's bound)."""
        pass_s = matrix_bytes / (bandwidth_gbs * 1e9)
        stream_s = matrix_bytes / (host_gbs * 1e9) if host_gbs > 0 else math.inf
        limit = regen_s / margin if fraction <= 0 else min(pass_s / fraction, regen_s / margin)
        return cls(pass_s, regen_s, stream_s, limit)

    @property
    def shared_pass_s(self) -> float:
        """The shortest mean pass each of two chains can have on one device (the fluid bound)."""
        rate = 1.0 / self.pass_s + (1.0 / self.regen_s if self.regen_s > 0 else math.inf)
        rate += 0.0 if math.isinf(self.stream_s) else 1.0 / self.stream_s
        return 2.0 / rate

    @property
    def gap_s(self) -> float:
        """Per pass, how much longer two chains on one device take than the judge's pace allows."""
        return self.shared_pass_s - self.limit_s

    def bound_s(self, passes: int) -> float:
        """The allowance under which no device serves two chains of ``passes`` that both pass:
        ``SAFETY`` of ``passes x gap_s`` (0 when the pace is as slow as two chains on one device)."""
        return max(0.0, SAFETY * passes * self.gap_s)

    def passes_for(self, allowance_s: float, most: int) -> int:
        """The fewest passes whose bound covers ``allowance_s`` (at most ``most``)."""
        if self.gap_s <= 0:
            return most
        return min(most, math.ceil(allowance_s / (SAFETY * self.gap_s)))


__all__ = ["SAFETY", "ChainPhysics"]
