"""Exclusivity on the validator's clock: did one device serve only this chain at the window's moment?

Memory residency is the exclusivity proof. Every memory chain of a window starts from a nonce the
validator sends at one moment (the window's *common moment*, when the BUILT gate fell); a chain
cannot begin before its nonce arrives and its passes are dependent. The judge holds **every pass**
to a pace, not the mean: pass j of every GPU must arrive by

    moment + j x limit_s + allowance_j

``limit_s`` is one pass at ``LockstepParams.resident_fraction`` (0.7) of the claimed model's table
bandwidth, never slower than the memory time judge's bound (regeneration / its margin), so no
prefix of the chain can be regenerated while the device serves another chain and paid for later by
fast resident passes (the mean alone let a second hotkey do that). ``allowance_j`` covers the
distance and its variation: the round trip measured before and after the chain (capped), plus the
seat's slack (``LockstepParams.slack``: 1.3 s for a GPU seat, 1.8 s for a machine without GPUs),
and never more than physics allows: ``bound_s`` (``proofs.physics``), the largest allowance under
which no device at the claimed model's figures can finish two chains, is the allowance of the last
pass, and pass j may come ``(passes - j) x gap_s`` later than that (what the rest of the chain
would cost a second one). Only the last pass matters to that capacity argument; the earlier
deadlines are defence in depth and let an honest chain that started late catch up.

What a chain's stamps can never show is that it was computed *slowly*: lines can be held back, so
holding lines back only makes a chain late. The bound assumes the device runs at its claimed model's
table figures: a device faster than the model it claims, or a real CPU (whose RAM holds many
matrices), is not bounded this way; the CPU class pays at most its floor per hotkey
(docs/presence.md).

Pure: takes timestamps, returns verdicts; no clock, no I/O.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from compute.validator.params import LockstepParams
from compute.validator.proofs.depth import MemoryOutcome


@dataclass(frozen=True)
class Residency:
    """One seat's memory chain as the validator saw it (all on its monotonic clock)."""

    started_at: float  # the start nonce was written
    arrivals: tuple[tuple[float, ...], ...]  # per GPU, every pass line's arrival
    rtt_s: float  # round trip measured in the same session before the chain
    pass_s: float = 0.0  # one pass at the table's bandwidth (the start estimate's widest spacing)
    limit_s: float = 0.0  # the pace: the slowest pass a resident chain may take (0: one table pass)
    bound_s: float = math.inf  # the physical bound on the last pass's allowance (``proofs.physics``)
    gap_s: float = 0.0  # per pass, how much longer two chains on one device take than the pace
    cpu: bool = False  # a machine without GPUs: judged with ``LockstepParams.cpu_lead_slack_s``
    rtt_after_s: float = 0.0  # round trip measured in the same session right after the chain

    def measured_allowance(self, policy: LockstepParams) -> float:
        """What distance asks: the larger round trip measured around the chain (capped) plus the
        seat's slack."""
        rtt = min(max(self.rtt_s, self.rtt_after_s, 0.0), policy.rtt_cap_s)
        return rtt + policy.slack(self.cpu)

    def allowance(self, policy: LockstepParams, j: int, passes: int) -> float:
        """How late pass ``j`` (1-based) of a ``passes``-long chain may come beyond the pace."""
        physical = self.bound_s + max(0, passes - j) * max(self.gap_s, 0.0)
        return min(self.measured_allowance(policy), physical)

    def pace(self) -> float:
        return self.limit_s if self.limit_s > 0 else self.pass_s

    def lateness(self, moment: float, policy: LockstepParams) -> list[tuple[float, int]]:
        """Per GPU: the largest margin by which a pass missed its deadline (negative: every pass in
        time) and that pass (1-based; 0 when the GPU sent no line)."""
        pace, out = self.pace(), []
        for times in self.arrivals:
            if not times:
                out.append((math.inf, 0))
                continue
            worst = max(
                (t - moment - j * pace - self.allowance(policy, j, len(times)), j)
                for j, t in enumerate(times, start=1)
            )
            out.append(worst)
        return out

    def leads(self) -> list[float]:
        """Per GPU: when the chain began, after the start nonce, as its own arrivals tell it (a
        figure, not a verdict).

        Pass r arrives no earlier than the chain's start + r passes + the way back; a stamp can
        only be late, never early. So the start is the least delayed estimate over the passes,
        ``min_r (arrival_r - r x spacing)``, with the spacing the median step between consecutive
        lines, never more than one pass at the table's bandwidth (``pass_s``)."""
        out = []
        for times in self.arrivals:
            if not times:
                out.append(math.inf)
                continue
            steps = [b - a for a, b in zip(times, times[1:], strict=False)]
            spacing = statistics.median(steps) if steps else 0.0
            if self.pass_s > 0:
                spacing = min(spacing, self.pass_s)
            out.append(min(t - (r + 1) * spacing for r, t in enumerate(times)) - self.started_at)
        return out


@dataclass(frozen=True)
class Exclusivity:
    ok: bool
    reason: str = ""
    lead_s: float = 0.0  # the latest GPU's start estimate after the nonce (a figure)
    bound_s: float = 0.0  # the last pass's allowance (measured, capped by physics)
    late_s: float = 0.0  # the largest margin by which a pass missed its deadline (<= 0: in time)


def residency_of(memory: MemoryOutcome, rtt_s: float, cpu: bool) -> Residency:
    """The residency judge's view of a memory proof: its stamps, round trips and physics."""
    physics = memory.physics
    return Residency(
        memory.started_at or 0.0,
        memory.arrivals,
        rtt_s,
        memory.table_pass_s,
        physics.limit_s if physics else 0.0,
        memory.bound_s,
        physics.gap_s if physics else 0.0,
        cpu,
        memory.rtt_after_s,
    )


def exclusivity(residency: Residency, moment: float, policy: LockstepParams) -> Exclusivity:
    """Whether every pass of every GPU arrived by its deadline after the window's common ``moment``."""
    leads = residency.leads()
    lead = max(leads) if leads else math.inf
    late = residency.lateness(moment, policy)
    passes = max((len(times) for times in residency.arrivals), default=0)
    bound = residency.allowance(policy, passes, passes)
    worst = max((margin for margin, _ in late), default=math.inf)
    if not policy.judge:  # a control for tests only: the judge switched off
        return Exclusivity(True, "", lead, bound, worst)
    if not late:
        return Exclusivity(False, "no GPU's chain to judge", lead, bound, worst)
    for gpu, (margin, j) in enumerate(late):
        if margin > 0:
            measured = residency.measured_allowance(policy)
            return Exclusivity(
                False,
                f"gpu {gpu}: not resident at the window's moment: pass {j} came {margin:.3g} s after its "
                f"deadline ({residency.pace() * 1e3:.3g} ms per pass from the start, allowance "
                f"{residency.allowance(policy, j, len(residency.arrivals[gpu])):.3g} s: RTT "
                f"{max(residency.rtt_s, residency.rtt_after_s):.3g} s capped at {policy.rtt_cap_s:.3g} s, "
                f"slack {policy.slack(residency.cpu):.3g} s = {measured:.3g} s, physical bound "
                f"{residency.bound_s:.3g} s at the last pass)",
                lead,
                bound,
                worst,
            )
    return Exclusivity(True, "", lead, bound, worst)


__all__ = ["Exclusivity", "Residency", "exclusivity", "residency_of"]
