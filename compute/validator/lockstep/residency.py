"""Exclusivity on the validator's clock: did a GPU hold its resident matrix at the window's moment?

Memory residency is the exclusivity proof. Every memory chain of a window starts from a nonce the
validator sends at one moment (the window's *common moment*, when the BUILT gate fell). A chain
cannot begin before its nonce arrives, its passes are dependent, and a GPU holds one resident
matrix at a time; so the validator takes, per GPU,

    residency interval = [chain start - min(RTT, cap) - slack, last pass]

(the chain's start as its own paced arrivals tell it, ``Residency.leads``; the round trip RTT
measured in the same session) and credits
the GPU as exclusively present only if that interval contains the common moment. A chain that was
run later (after another hotkey's chain and a rebuild on the same device) begins too late; with the
chain sized to last ``min_chain_s`` = 3 x (cap + slack) at the table bandwidth, no device that passes
the time judge fits two chains in the bound, whatever latency it fakes (a round trip above the cap
is judged as the cap: distance buys no slack; a miner that inflates its RTT below the cap gains at
most cap + slack, less than one chain).

A machine without GPUs gets a wider slack (``LockstepParams.cpu_lead_slack_s``): its worker shares
the cores with whatever else the machine runs, and an honest CPU chain starts up to ~1.6 s late at
load >= 10. Still no device at the CPU table's figures fits two chains: cap + 1.8 s < the 2.7 s chain
+ a rebuild. What a chain's stamps can never show is that it was computed *slowly*: lines can be held
back, so the table's speed (the claimed model's, or the CPU table's) is the only lower bound on a
chain's compute time. The start estimate therefore never assumes a spacing wider than one pass at
the table's bandwidth (``Residency.pass_s``): pacing the chain slower cannot stretch it back to the
start. A CPU-class device faster than the CPU table is not bounded this way (nor is a real CPU,
which holds many matrices in RAM); the CPU class pays at most its floor per hotkey (docs/presence.md).

Pure: takes timestamps, returns verdicts; no clock, no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compute.validator.params import LockstepParams


@dataclass(frozen=True)
class Residency:
    """One seat's memory chain as the validator saw it (all on its monotonic clock)."""

    started_at: float  # the start nonce was written
    arrivals: tuple[tuple[float, ...], ...]  # per GPU, every pass line's arrival
    rtt_s: float  # round trip measured in the same session (info)
    pass_s: float = 0.0  # one pass at the table's bandwidth: the widest spacing assumed (0: no bound)
    cpu: bool = False  # a machine without GPUs: judged with ``LockstepParams.cpu_lead_slack_s``

    def bound(self, policy: LockstepParams) -> float:
        """The latest start allowed after the start nonce: the round trip (capped) plus the slack."""
        return min(max(self.rtt_s, 0.0), policy.rtt_cap_s) + policy.slack(self.cpu)

    def intervals(self, policy: LockstepParams) -> list[tuple[float, float]]:
        """Per GPU, the residency interval (empty arrivals give an empty interval)."""
        bound = self.bound(policy)
        return [
            (self.started_at + lead - bound, times[-1]) if times else (math.inf, -math.inf)
            for lead, times in zip(self.leads(), self.arrivals, strict=True)
        ]

    def leads(self) -> list[float]:
        """Per GPU: when the chain began, after the start nonce, as its own arrivals tell it.

        Pass r arrives no earlier than the chain's start + r passes + the way back; a stamp can
        only be late (a busy validator, a slow network), never early. So the start is the least
        delayed estimate over the passes, ``min_r (arrival_r - r x spacing)``, with the spacing the
        median step between consecutive lines (the chain's own pace), never more than one pass at
        the table's bandwidth (``pass_s``): a chain whose later passes are paced slower (lines held
        back) cannot stretch its estimated start back before the moment it really began."""
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
    lead_s: float = 0.0  # the latest GPU's lead
    bound_s: float = 0.0  # the lead it was allowed (RTT, capped, plus slack)


def exclusivity(residency: Residency, moment: float, policy: LockstepParams) -> Exclusivity:
    """Whether every GPU's residency interval contains the window's common ``moment``."""
    bound = residency.bound(policy)
    leads = residency.leads()
    lead = max(leads) if leads else float("inf")
    for gpu, (low, high) in enumerate(residency.intervals(policy)):
        if not low <= moment <= high:
            return Exclusivity(
                False,
                f"gpu {gpu}: not resident at the window's moment: its chain began "
                f"{leads[gpu]:.3g} s after the start (bound {bound:.3g} s: RTT {residency.rtt_s:.3g} s, "
                f"cap {policy.rtt_cap_s:.3g} s, slack {policy.slack(residency.cpu):.3g} s)",
                lead,
                bound,
            )
    return Exclusivity(True, "", lead, bound)


def common_interval(intervals: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """The interval every given interval contains (None when they do not all overlap)."""
    if not intervals:
        return None
    low, high = max(i[0] for i in intervals), min(i[1] for i in intervals)
    return (low, high) if low <= high else None


def window_report(residencies: Mapping[str, Residency], moment: float, policy: LockstepParams) -> dict:
    """Per seat: its verdict; and the window's common interval over the exclusive seats' GPUs."""
    verdicts = {name: exclusivity(r, moment, policy) for name, r in residencies.items()}
    kept = [iv for name, r in residencies.items() if verdicts[name].ok for iv in r.intervals(policy)]
    return {"verdicts": verdicts, "common": common_interval(kept)}


__all__ = ["Exclusivity", "Residency", "common_interval", "exclusivity", "window_report"]
