"""The residency judge and its physics, pure: every pass held to a pace, an allowance bounded by
what one device can do for two chains, honest chains far away with their delay varying.

A device is simulated at its claimed model's figures (``proofs.physics``: it reads its resident
matrix once per table pass, regenerates one at the policy's fastest rate and streams one over the
policy's host link, all at once), serving two hotkeys' chains with every schedule we could think of
(the second chain regenerating its first passes while the first one holds the device, a hand-over
mid-chain, the device alternating in slices of 0.05-2 s); the cheater fakes its round trip at the
cap. An honest chain runs at 70 % of its table bandwidth through a path whose return delay rises by
a second after its round trip was measured.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from compute.lab.bench.far_gpu import schedules, two_chains
from compute.pog import judge_memory_timing
from compute.scoring import load_gpu_table
from compute.validator.lockstep.residency import Residency, exclusivity
from compute.validator.params import DepthParams, LockstepParams, RoundParams
from compute.validator.proofs.depth import ChainPlan, plan_chain
from compute.validator.proofs.physics import SAFETY

TABLE = load_gpu_table()
POLICY = LockstepParams()
CAP = POLICY.rtt_cap_s


def plan(model: str | None, lockstep: LockstepParams = POLICY) -> ChainPlan:
    params = RoundParams(round_id=1, block=1, depth=DepthParams(), lockstep=lockstep)
    found = plan_chain(TABLE, [model] if model else [], 1, params)
    assert found is not None
    return found


def residency(p: ChainPlan, arrivals, rtt: float, rtt_after: float = 0.0, cpu: bool = False) -> Residency:
    ph = p.physics
    return Residency(0.0, tuple(arrivals), rtt, ph.pass_s, ph.limit_s, p.bound_s, ph.gap_s, cpu, rtt_after)


def honest(p: ChainPlan, rtt: float, fraction: float = 0.7, delay: Callable[[float], float] = lambda t: 0.0):
    """An honest chain's arrivals: the nonce half a round trip out, a pass at ``fraction`` of the
    table bandwidth, back half a round trip plus ``delay(t)`` (in order, as TCP keeps them)."""
    out, last = [], 0.0
    for j in range(1, p.challenge.passes + 1):
        done = rtt / 2 + j * p.physics.pass_s / fraction
        last = max(last, done + rtt / 2 + delay(done))
        out.append(last)
    return tuple(out)


# ---------------------------------------------------------------- one device, two chains
# ``two_chains`` and ``schedules`` (the simulated device and who holds it) are the benchmark's own
# (``bench distance --far-gpu`` plays the same cheats): one simulator, judged here.


@pytest.mark.parametrize("model", [None, "H100 SXM", "L4", "RTX 5090"])
def test_no_schedule_of_one_device_passes_two_chains(model) -> None:
    """Whatever the schedule, at most one of the two chains keeps its pace within the allowance,
    the cheater faking a round trip at the cap before and after the chain."""
    p = plan(model)
    passes = p.challenge.passes
    for name, schedule in schedules(passes).items():
        chains = two_chains(p.physics, passes, schedule)
        verdicts = [
            exclusivity(residency(p, (times,), 5.0, 5.0, model is None), 0.0, POLICY) for times in chains
        ]
        assert sum(v.ok for v in verdicts) <= 1, (model, name, [v.reason for v in verdicts])


def test_the_bound_is_what_two_chains_sharing_a_device_at_best_need() -> None:
    """Two chains sharing the device's whole capacity evenly (the fluid bound: no cost for swapping
    matrices) each keep a pass every ``shared_pass_s``. Under the physical bound they fail; 10 %
    above it they would pass: the bound is the limit, not a guess."""
    for model in (None, "H100 SXM", "L4"):
        p = plan(model)
        shared = tuple(j * p.physics.shared_pass_s for j in range(1, p.challenge.passes + 1))
        judged = residency(p, (shared,), 5.0, 5.0, model is None)
        assert not exclusivity(judged, 0.0, POLICY).ok
        loose = Residency(**{**judged.__dict__, "bound_s": 1.1 * judged.bound_s / SAFETY})
        assert exclusivity(loose, 0.0, POLICY).ok, model


def test_regenerating_the_first_passes_passed_the_mean_but_not_the_pace() -> None:
    """The cheat the judge before this one did not see: the second hotkey's chain regenerates its
    first passes at the fastest rate the validator assumes while the device serves the first
    hotkey's chain, then takes the device. Its mean pass passes the memory time judge and its start
    estimate is within the former bound (RTT + 0.3 s); its pass 1 .. k cannot keep the pace."""
    p = plan("H100 SXM")
    first, second = two_chains(p.physics, p.challenge.passes, schedules(p.challenge.passes)["regen-first"])
    timing = judge_memory_timing(p.challenge, 0.0, [list(second)], p.policy, p.bandwidth_gbs)
    assert timing.ok, timing.reasons  # the mean
    judged = residency(p, (second,), 0.05)
    assert min(judged.leads()) < 0.05 + 0.3  # the start estimate: within the former bound
    verdict = exclusivity(judged, 0.0, POLICY)
    assert not verdict.ok and "not resident at the window's moment" in verdict.reason
    assert exclusivity(residency(p, (first,), 0.05), 0.0, POLICY).ok  # the first chain held it


def test_a_pass_line_held_back_only_makes_a_chain_late() -> None:
    p = plan("H100 SXM")
    times = list(honest(p, 0.05))
    times[100:] = [t + 2.0 for t in times[100:]]  # lines from pass 101 on held back 2 s
    assert not exclusivity(residency(p, (tuple(times),), 0.05), 0.0, POLICY).ok


# ---------------------------------------------------------------- honest chains
@pytest.mark.parametrize("model", sorted(TABLE.models))
def test_an_honest_gpu_far_away_whose_delay_rises_a_second_after_its_pings_is_present(model) -> None:
    """Every class at 70 % of its table bandwidth, 150 ms away with +/- 20 % jitter, its return
    delay one second higher for three seconds right after the round trip was measured (a flood
    after the pings): present and its memory proven."""
    p, rtt, rng = plan(model), 0.15, random.Random(7)

    def delay(t: float) -> float:
        return (1.0 if 0.2 <= t < 3.2 else 0.0) + 0.2 * rtt / 2 * rng.uniform(-1, 1)

    arrivals = honest(p, rtt, delay=delay)
    verdict = exclusivity(residency(p, (arrivals,), rtt), 0.0, POLICY)
    assert verdict.ok, verdict.reason
    assert judge_memory_timing(p.challenge, 0.0, [list(arrivals)], p.policy, p.bandwidth_gbs).ok


STEP_SHORT = {"L4", "RTX 5090"}  # the classes whose physical bound is under 150 ms + 1 s (see below)


@pytest.mark.parametrize("model", sorted(TABLE.models))
def test_an_honest_gpu_whose_delay_stays_a_second_higher_is_present_within_its_physical_bound(model) -> None:
    """The delay rises by a second after the pings and stays up to the end of the chain (the round
    trip measured after the chain shows it). The last pass's allowance is the physical bound, so a
    class is present with that step where its bound covers 150 ms + 1 s, and otherwise with the
    largest step its bound allows (the L4 and the RTX 5090: 1.04 s and 1.07 s of allowance at 256
    passes under the policy's 64 GB/s host link and 1e13 element-rounds/s, so a step of 0.88 s and
    0.91 s at 150 ms)."""
    p, rtt = plan(model), 0.15
    step = 1.0 if model not in STEP_SHORT else p.bound_s - rtt - 0.01
    assert (p.bound_s >= rtt + 1.0) is (model not in STEP_SHORT), p.bound_s
    arrivals = honest(p, rtt, delay=lambda t: step)
    verdict = exclusivity(residency(p, (arrivals,), rtt, rtt + step), 0.0, POLICY)
    assert verdict.ok, verdict.reason
    if model in STEP_SHORT:
        assert step >= 0.85 and p.bound_s == pytest.approx(SAFETY * 256 * p.physics.gap_s)


def test_every_class_can_be_proven_exclusive_at_the_resident_fraction() -> None:
    """Two chains on one device are slower than the pace for every table class (else no allowance
    could be given): the gap is 0.07 (L4) to 0.37 (B200) of a table pass per pass."""
    gaps = {model: plan(model).physics.gap_s / plan(model).physics.pass_s for model in TABLE.models}
    assert min(gaps.values()) > 0.05 and max(gaps.values()) < 0.4, gaps


@pytest.mark.parametrize(("late_s", "rtt"), [(0.0, 0.002), (1.6, 0.002), (1.6, 0.3), (1.75, 0.05)])
def test_an_honest_cpu_chain_that_starts_late_on_a_loaded_machine_is_present(late_s, rtt) -> None:
    """At load >= 10 an honest CPU worker begins its chain 0.5-1.6 s late (its cores are shared),
    then runs 6-27x faster than the CPU table. A machine without GPUs is judged with the CPU slack
    (1.8 s): its first passes may come that late, since the rest of its chain would cost a second
    chain more than that; the same chain on a GPU seat keeps the GPU slack (1.3 s)."""
    p = plan(None)
    arrivals = tuple(rtt + late_s + 0.002 * j for j in range(1, p.challenge.passes + 1))
    assert exclusivity(residency(p, (arrivals,), rtt, cpu=True), 0.0, POLICY).ok
    assert exclusivity(residency(p, (arrivals,), rtt, cpu=False), 0.0, POLICY).ok is (late_s == 0.0)


def test_every_gpu_of_a_machine_must_keep_the_pace() -> None:
    p = plan("H100 SXM")
    on_time = honest(p, 0.04)
    late = tuple(t + 3.0 for t in on_time)
    assert not exclusivity(residency(p, (on_time, late), 0.04), 0.0, POLICY).ok
    assert exclusivity(residency(p, (on_time, on_time), 0.04), 0.0, POLICY).ok
    assert not exclusivity(residency(p, (on_time, ()), 0.04), 0.0, POLICY).ok  # a GPU without lines


def test_a_round_trip_above_the_cap_buys_no_allowance() -> None:
    p = plan("H100 SXM")
    judged = residency(p, (honest(p, 2.0),), 2.0, 2.0)
    assert judged.measured_allowance(POLICY) == pytest.approx(CAP + POLICY.lead_slack_s)
    assert not exclusivity(judged, 0.0, POLICY).ok


def test_the_judge_switched_off_credits_anything() -> None:
    """The control the cheat tests use: ``LockstepParams(judge=False)``."""
    p = plan("H100 SXM")
    late = tuple(t + 30.0 for t in honest(p, 0.04))
    assert exclusivity(residency(p, (late,), 0.04), 0.0, LockstepParams(judge=False)).ok
