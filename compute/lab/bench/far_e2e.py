"""``python -m compute bench distance --far-e2e N``: presence windows of an honest far seat, end to end.

The real validator code all the way: one capacity proof (``check_miner``), then ``N`` presence checks
(``presence.check_presence``: lease, SSH, worker, info, build, the chain from the window's moment,
three pings after it, both memory judges and the residency judge) of one honest miner whose memory
passes run on the emulated device of ``localnet/one_device.py`` at ``--fraction`` of the CPU table's
bandwidth (a device of fixed speed keeping its pace: the claimed model is the CPU class, the only one
this box can hold; ``--far-gpu`` covers every GPU class through the same judges). Each lease's SSH
goes through ``rise_proxy.py`` (the latency proxy at ``--rtt-ms``, +/- ``--jitter``), whose way back
rises by ``--step`` s from a moment drawn after the session's first pings: for 0.5-3 s (transient)
in even windows, to the session's end (sustained: the pings after the chain see it) in odd ones. The
CPU seat is judged with the GPU seat's slack (``lead_slack_s`` 1.3 s, not the CPU's 1.8 s), so the
margin is a GPU seat's.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

RISE_PROXY = Path(__file__).resolve().parent / "rise_proxy.py"


def _proxy(args: argparse.Namespace, at_s: float, for_s: float, trace: Path) -> tuple[str, ...]:
    return (
        sys.executable,
        str(RISE_PROXY),
        "--rtt-ms",
        f"{args.rtt_ms:g}",
        "--jitter",
        f"{args.jitter:g}",
        "--rise-s",
        f"{args.step:g}",
        "--rise-at-s",
        f"{at_s:.3f}",
        "--rise-for-s",
        f"{for_s:.3f}",
        "--trace",
        str(trace),
        "{host}",
        "{port}",
    )


def _risen(trace: Path) -> dict[str, Any]:
    """What the way back did in a window's session (from the proxy's trace): when the rise began and
    ended, and how many chunks it delayed."""
    lines = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    back = [line for line in lines if line["back"]]
    risen = [line for line in back if line["rise"] > 0]
    return {
        "chunks_back": len(back),
        "chunks_risen": len(risen),
        "rise_from": min((line["at"] for line in risen), default=None),
        "rise_to": max((line["at"] for line in risen), default=None),
        "session_s": max((line["t"] for line in lines), default=0.0),
    }


class Seen:
    """What the residency judge saw in each window (the validator's own clock, CLOCK_MONOTONIC like
    the proxy's trace): the round trips before and after the chain, the chain's span, the verdict's
    margin. It records; the verdict is the judge's own."""

    def __init__(self) -> None:
        self.judged: list[dict[str, Any]] = []

    def wrap(self, judge: Any) -> Any:
        def recording(residency: Any, moment: float, policy: Any) -> Any:
            verdict = judge(residency, moment, policy)
            arrivals = residency.arrivals[0] if residency.arrivals else ()
            self.judged.append(
                {
                    "rtt_before_s": round(residency.rtt_s, 4),
                    "rtt_after_s": round(residency.rtt_after_s, 4),
                    "chain_from": residency.started_at,
                    "chain_to": arrivals[-1] if arrivals else residency.started_at,
                    "late_s": round(verdict.late_s, 4),
                    "allowance_last_s": round(verdict.bound_s, 4),
                }
            )
            return verdict

        return recording


def _overlap(window: dict[str, Any]) -> float:
    """Seconds of the chain (its start nonce to its last pass line) during which the way back was
    risen."""
    if window.get("rise_from") is None or "chain_from" not in window:
        return 0.0
    return max(
        0.0, min(window["rise_to"], window["chain_to"]) - max(window["rise_from"], window["chain_from"])
    )


async def far_presence(args: argparse.Namespace, root: Path, client: Any, target: Any, base: Any) -> dict:
    """One capacity proof, then ``args.far_e2e`` presence windows through the rising path."""
    from compute.scoring import ScoringConfig, load_gpu_table
    from compute.validator.check.context import MinerCheck
    from compute.validator.check.miner import check_miner
    from compute.validator.context import ValidatorContext
    from compute.validator.presence import check as presence_check
    from compute.validator.presence.check import check_presence

    table, scoring, rng = load_gpu_table(), ScoringConfig(), random.Random(args.seed)
    lockstep = replace(base.lockstep, cpu_lead_slack_s=base.lockstep.lead_slack_s)  # a GPU seat's slack
    base = replace(base, lockstep=lockstep)
    started = time.monotonic()
    proven = await check_miner(MinerCheck(client, target, base, table, scoring))
    if proven is None or not proven.ok:
        return {"capacity_proof": None if proven is None else list(proven.reasons), "windows": []}
    ctx = ValidatorContext(None, None, client, "", base, table, scoring)  # type: ignore[arg-type]
    seen = Seen()
    judge = presence_check.exclusivity
    presence_check.exclusivity = seen.wrap(judge)  # type: ignore[attr-defined]
    windows = []
    try:
        for i in range(args.far_e2e):
            trace = root / f"trace-{i}.jsonl"
            at_s = rng.uniform(args.rise_after[0], args.rise_after[1])
            for_s = rng.uniform(0.5, 3.0) if i % 2 == 0 else 3600.0
            params = replace(base, round_id=i + 2, lease_proxy=_proxy(args, at_s, for_s, trace))
            judged = len(seen.judged)
            entry = (await check_presence(ctx, [target], {target.uid: proven}, params))[0]
            window = {
                "rise": "transient" if i % 2 == 0 else "sustained",
                "present": entry.fraction > 0,
                "reason": entry.reason,
                **_risen(trace),
                **(seen.judged[judged] if len(seen.judged) > judged else {}),
            }
            window["risen_in_chain_s"] = round(_overlap(window), 3)
            window["after_pings"] = (
                window.get("rtt_before_s", 1.0) < args.rtt_ms / 1e3 * (1 + args.jitter) + 0.05
            )
            windows.append(window)
    finally:
        presence_check.exclusivity = judge  # type: ignore[attr-defined]
    return {
        "capacity_proof": "ok",
        "windows": windows,
        "failed": sum(not w["present"] for w in windows),
        "risen_windows": sum(w["risen_in_chain_s"] > 0 and w["after_pings"] for w in windows),
        "risen_in_chain_s": [w["risen_in_chain_s"] for w in windows],
        "rtt_before_s_max": max((w.get("rtt_before_s", 0.0) for w in windows), default=None),
        "rtt_after_s": [w.get("rtt_after_s") for w in windows],
        "late_s_max": max((w.get("late_s", 0.0) for w in windows), default=None),
        "step_s": args.step,
        "rtt_ms": args.rtt_ms,
        "fraction": args.fraction,
        "slack_s": lockstep.lead_slack_s,
        "wall_s": round(time.monotonic() - started, 1),
    }


__all__ = ["RISE_PROXY", "far_presence"]
