"""``python -m compute bench distance --far-gpu``: honest GPU seats far away, and one device serving two.

A GPU seat cannot be emulated end to end on a CPU box (an L4's memory proof holds 19 GB), so this
lane runs the validator's own planning and judges on timestamps a seat's path would produce: the
chain ``plan_chain`` sizes for the claimed model (256 passes, its pace and physical bound from
``proofs.physics``), the residency judge (``lockstep.residency.exclusivity``) and the memory time
judge (``pog.judge_memory_timing``), with the round trips measured as the validator measures them
(the fastest of three pings before the chain and three right after it).

- **Honest far seat**: the device keeps its pace at ``fraction`` (0.7) of the model's table
  bandwidth, each pass due one pass after the one before from the chain's start (as
  ``localnet.one_device`` paces its passes); the nonce goes out and every pass line comes back
  through a path of ``rtt`` with per-line jitter, in order (as ``localnet.latency_proxy`` delays a
  stream). Per window, after the pings, the return delay rises by ``step`` seconds: *transient*
  (for 0.5-3 s, starting anywhere in the chain's body, where the physical cap does not bind) or
  *sustained* (from a random moment to past the after-chain pings, which see it), by 1 s or, where
  the claimed model's physical bound cannot give 1 s, by the bound minus the round trip and the
  jitter (the largest step physics allows; ``step_s`` in the figures).
- **One device, two chains**: a device at the claimed model's figures (reads its resident matrix
  at the table bandwidth, regenerates at the policy's fastest rate, streams from the host link, all
  at once) serves two hotkeys' chains that start at the moment, in one schedule per window
  (regenerate first, hand over after a quarter, half or three quarters, alternate in slices of
  0.05-2 s), the cheater faking a round trip at 5 s (judged as the cap) before and after.
  A window is a failure of the judge if both chains pass; a single chain regenerating every pass
  (no resident matrix) must fail too.

Pure simulation: no clock, no network; seeded, so the figures repeat.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PINGS = 3
SLICES = (0.05, 0.2, 0.5, 1.0, 2.0)
Schedule = Callable[[float, list[int]], int]  # (time, passes done per chain) -> the chain holding the device


@dataclass(frozen=True)
class Path:
    """A seat's path: round trip ``rtt_s``, each line's one-way delay +/- ``jitter`` of half of it,
    and a rise of ``step_s`` on the way back during [``rise_at``, ``rise_until``)."""

    rtt_s: float
    jitter: float
    step_s: float
    rise_at: float
    rise_until: float

    def back(self, t: float, rng: random.Random) -> float:
        rise = self.step_s if self.rise_at <= t < self.rise_until else 0.0
        return self.rtt_s / 2 * (1 + self.jitter * rng.uniform(-1, 1)) + rise

    def out(self, rng: random.Random) -> float:
        return self.rtt_s / 2 * (1 + self.jitter * rng.uniform(-1, 1))


def _ping(path: Path, at: float, rng: random.Random) -> tuple[float, float]:
    """One ping sent at ``at``: (its round trip, when its answer came)."""
    arrived = at + path.out(rng)
    back = arrived + path.back(arrived, rng)
    return back - at, back


def honest_window(plan: Any, path: Path, fraction: float, rng: random.Random) -> dict[str, Any]:
    """One window of an honest seat: the judges' verdicts and what the path did."""
    from compute.pog import judge_memory_timing
    from compute.validator.lockstep.residency import Residency, exclusivity
    from compute.validator.params import LockstepParams

    policy, ph, passes = LockstepParams(), plan.physics, plan.challenge.passes
    before = min(_ping(path, -1.0 - i * path.rtt_s, rng)[0] for i in range(PINGS))  # before the moment
    start = path.out(rng)  # the nonce reaches the device
    arrivals, last = [], 0.0
    for j in range(1, passes + 1):
        done = start + j * ph.pass_s / fraction
        last = max(last, done + path.back(done, rng))  # one stream: lines keep their order
        arrivals.append(last)
    after, at = [], arrivals[-1]
    for _ in range(PINGS):
        rtt, at = _ping(path, at, rng)
        after.append(rtt)
    judged = Residency(
        0.0, (tuple(arrivals),), before, ph.pass_s, ph.limit_s, plan.bound_s, ph.gap_s, False, min(after)
    )
    verdict = exclusivity(judged, 0.0, policy)
    timing = judge_memory_timing(plan.challenge, 0.0, [arrivals], plan.policy, plan.bandwidth_gbs)
    return {
        "present": verdict.ok and timing.ok,
        "reason": verdict.reason or "; ".join(timing.reasons[:1]),
        "late_s": verdict.late_s,
        "rtt_before_s": before,
        "rtt_after_s": min(after),
        "chain_s": arrivals[-1],
    }


def two_chains(ph: Any, passes: int, holder: Schedule) -> list[tuple[float, ...]]:
    """Pass times of two chains on one device at its claimed figures (the fluid model of
    ``tests/validator/test_residency.py``): ``holder(t, done)`` names the chain whose matrix the
    device holds; it reads at the table bandwidth, a chain without its matrix (and a new holder's
    first pass, which rebuilds it) shares the device's regeneration and host link."""
    dt = ph.pass_s / 8
    slow = 1.0 / ph.regen_s + (0.0 if math.isinf(ph.stream_s) else 1.0 / ph.stream_s)
    progress, done = [0.0, 0.0], [0, 0]
    times: tuple[list[float], list[float]] = ([], [])
    resident, t, current = [False, False], 0.0, -2
    while min(done) < passes and t < 10 * passes * ph.regen_s:
        now = holder(t, done)
        if now != current:
            resident, current = [False, False], now
        fast = [c == current and resident[c] and done[c] < passes for c in (0, 1)]
        starving = [c for c in (0, 1) if not fast[c] and done[c] < passes]
        for c in (0, 1):
            if done[c] >= passes:
                continue
            progress[c] += (1.0 / ph.pass_s if fast[c] else slow / len(starving)) * dt
            if progress[c] >= 1.0:
                progress[c] -= 1.0
                done[c] += 1
                times[c].append(t + dt)
                if c == current:
                    resident[c] = True
        t += dt
    return [tuple(times[0]), tuple(times[1])]


def _regen_first(passes: int) -> Schedule:
    def holder(t: float, done: list[int]) -> int:
        return 0 if done[0] < passes else 1

    return holder


def _hand_over(at: int, passes: int) -> Schedule:
    def holder(t: float, done: list[int]) -> int:
        return 0 if done[0] < at else (1 if done[1] < passes else 0)

    return holder


def _alternate(slice_s: float) -> Schedule:
    def holder(t: float, done: list[int]) -> int:
        return int(t // slice_s) % 2

    return holder


def schedules(passes: int) -> dict[str, Schedule]:
    """Who holds the device: the first chain, then the second regenerating meanwhile; a hand-over
    after a quarter, half or three quarters of the first chain; slices of 0.05-2 s."""
    out = {"regen-first": _regen_first(passes)}
    out.update({f"hand-over-{k}/4": _hand_over(passes * k // 4, passes) for k in (1, 2, 3)})
    out.update({f"alternate-{s:g}s": _alternate(s) for s in SLICES})
    return out


def cheat_window(plan: Any, schedule: str, rng: random.Random) -> dict[str, Any]:
    """One window of a device serving two chains in ``schedule``, faking a 5 s round trip."""
    from compute.validator.lockstep.residency import Residency, exclusivity
    from compute.validator.params import LockstepParams

    policy, ph, passes = LockstepParams(), plan.physics, plan.challenge.passes
    chains = two_chains(ph, passes, schedules(passes)[schedule])
    credited = 0
    for times in chains:
        judged = Residency(0.0, (times,), 5.0, ph.pass_s, ph.limit_s, plan.bound_s, ph.gap_s, False, 5.0)
        credited += exclusivity(judged, 0.0, policy).ok
    regen = tuple(j * ph.regen_s for j in range(1, passes + 1))  # no resident matrix at all
    judged = Residency(0.0, (regen,), 5.0, ph.pass_s, ph.limit_s, plan.bound_s, ph.gap_s, False, 5.0)
    return {
        "schedule": schedule,
        "credited": credited,
        "regenerating_credited": exclusivity(judged, 0.0, policy).ok,
    }


def _plan(model: str) -> Any:
    from compute.scoring import load_gpu_table
    from compute.validator.params import DepthParams, LockstepParams, RoundParams
    from compute.validator.proofs.depth import plan_chain

    params = RoundParams(round_id=1, block=1, depth=DepthParams(), lockstep=LockstepParams())
    found = plan_chain(load_gpu_table(), [model], 1, params)
    if found is None:
        raise SystemExit(f"far-gpu: {model!r} is not in the GPU table")
    return found


def largest_step(plan: Any, rtt: float, jitter: float, want: float) -> float:
    """``want``, or the largest sustained rise the model's physical bound lets an honest seat keep
    (the last pass's allowance is the bound: the rise + the round trip + its jitter must fit)."""
    return round(min(want, plan.bound_s - rtt * (1 + jitter) - 0.005), 3)


def model_figures(model: str, args: Any, seed: int) -> dict[str, Any]:
    """Every lane of one claimed model, ``args.windows`` windows each."""
    from compute.validator.params import LockstepParams

    plan, rng = _plan(model), random.Random(seed)
    ph, passes, rtt, jitter = plan.physics, plan.challenge.passes, args.rtt_ms / 1e3, args.jitter
    chain_s = passes * ph.pass_s / args.fraction
    policy = LockstepParams()
    tail = max(0.0, (rtt * (1 + jitter) + args.step + 0.2 - plan.bound_s) / max(ph.gap_s, 1e-9))
    body = chain_s - tail * ph.limit_s  # the passes whose allowance the physical cap does not bind
    lanes: dict[str, list[dict[str, Any]]] = {"transient": [], "sustained": []}
    sustained_step = largest_step(plan, rtt, jitter, args.step)
    for _ in range(args.windows):
        length = rng.uniform(0.5, 3.0)
        at = rng.uniform(0.0, max(0.0, body - length))
        path = Path(rtt, jitter, rng.uniform(args.step, args.step + 0.2), at, at + length)
        lanes["transient"].append(honest_window(plan, path, args.fraction, rng))
        at = rng.uniform(0.0, chain_s * 0.9)
        path = Path(rtt, jitter, sustained_step, at, math.inf)
        lanes["sustained"].append(honest_window(plan, path, args.fraction, rng))
    names = list(schedules(passes))
    cheats = [cheat_window(plan, names[i % len(names)], rng) for i in range(args.windows)]
    return {
        "model": model,
        "pass_s": round(ph.pass_s, 5),
        "limit_s": round(ph.limit_s, 5),
        "shared_pass_s": round(ph.shared_pass_s, 5),
        "gap_s": round(ph.gap_s, 5),
        "passes": passes,
        "chain_s": round(chain_s, 2),
        "bound_s": round(plan.bound_s, 3),
        "allowance_measured_s": round(min(rtt, policy.rtt_cap_s) + policy.lead_slack_s, 3),
        "transient_step_s": [args.step, args.step + 0.2],
        "transient_body_s": round(body, 2),
        "transient_failed": sum(not w["present"] for w in lanes["transient"]),
        "sustained_step_s": sustained_step,
        "sustained_failed": sum(not w["present"] for w in lanes["sustained"]),
        "honest_late_s_max": round(max(w["late_s"] for ws in lanes.values() for w in ws), 4),
        "honest_failures": sorted({w["reason"] for ws in lanes.values() for w in ws if not w["present"]})[:3],
        "cheat_windows_two_credited": sum(c["credited"] >= 2 for c in cheats),
        "cheat_windows_one_credited": sum(c["credited"] == 1 for c in cheats),
        "regenerating_credited": sum(c["regenerating_credited"] for c in cheats),
        "windows": args.windows,
    }


def far_gpu(args: Any) -> dict[str, Any]:
    """The figures of every ``args.models`` model (a list of table names)."""
    rows = [model_figures(model, args, seed=args.seed + i) for i, model in enumerate(args.models)]
    return {
        "far_gpu": rows,
        "rtt_ms": args.rtt_ms,
        "jitter": args.jitter,
        "fraction": args.fraction,
        "step_s": args.step,
        "windows": args.windows,
        "honest_failed": sum(r["transient_failed"] + r["sustained_failed"] for r in rows),
        "cheats_credited_twice": sum(
            r["cheat_windows_two_credited"] + r["regenerating_credited"] for r in rows
        ),
    }


__all__ = ["Path", "far_gpu", "honest_window", "largest_step", "model_figures", "two_chains"]
