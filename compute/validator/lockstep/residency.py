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

    def intervals(self, policy: LockstepParams) -> list[tuple[float, float]]:
        """Per GPU, the residency interval (empty arrivals give an empty interval)."""
        rtt = min(max(self.rtt_s, 0.0), policy.rtt_cap_s)
        return [
            (self.started_at + lead - rtt - policy.lead_slack_s, times[-1])
            if times
            else (math.inf, -math.inf)
            for lead, times in zip(self.leads(), self.arrivals, strict=True)
        ]

    def leads(self) -> list[float]:
        """Per GPU: when the chain began, after the start nonce, as its own arrivals tell it.

        Pass r arrives no earlier than the chain's start + r passes + the way back; a stamp can
        only be late (a busy validator, a slow network), never early. So the start is the least
        delayed estimate over the passes, ``min_r (arrival_r - r x spacing)``, with the spacing the
        median step between consecutive lines (the chain's own pace: a cheater cannot inflate it
        without slowing the whole chain past the memory time judge)."""
        out = []
        for times in self.arrivals:
            if not times:
                out.append(math.inf)
                continue
            steps = [b - a for a, b in zip(times, times[1:], strict=False)]
            spacing = statistics.median(steps) if steps else 0.0
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
    bound = min(max(residency.rtt_s, 0.0), policy.rtt_cap_s) + policy.lead_slack_s
    leads = residency.leads()
    lead = max(leads) if leads else float("inf")
    for gpu, (low, high) in enumerate(residency.intervals(policy)):
        if not low <= moment <= high:
            return Exclusivity(
                False,
                f"gpu {gpu}: not resident at the window's moment: its chain began "
                f"{leads[gpu]:.3g} s after the start (bound {bound:.3g} s: RTT {residency.rtt_s:.3g} s, "
                f"cap {policy.rtt_cap_s:.3g} s, slack {policy.lead_slack_s:.3g} s)",
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
