"""Sustained rounds: derived segments, back-to-back runs verified, throttling lowers the factor."""

from __future__ import annotations

import time

import numpy as np
import pytest

from compute.pog import Commitment, Opening, choose_openings, verify
from compute.pog.depth_engine import SustainedRunner
from compute.pog.engine import EngineError, ProverEngine
from compute.pog.sustained import (
    SustainedError,
    analyse_series,
    choose_segments,
    confirmation_reference,
    confirmed,
    plan_sustained,
    reference_fraction_for,
    sustained_factor,
)


def _plan(segments_s: float = 4.0):
    plan = plan_sustained(
        1e-4, "fp32", duration_s=segments_s, segment_s=1.0, m=32, rng=np.random.default_rng(5)
    )
    return plan


def test_segments_are_distinct_and_reproducible() -> None:
    plan = _plan()
    keys = {c.key for c in plan.challenges()}
    assert plan.segments == 4 and len(keys) == 4
    assert plan.segment(2) == plan.segment(2)
    with pytest.raises(SustainedError):
        plan.segment(4)


def test_back_to_back_segments_verify_and_series_is_flat() -> None:
    plan = _plan()
    runner = SustainedRunner(ProverEngine("cpu", threads=1))
    lines: list[tuple[float, dict]] = []
    sent = time.perf_counter()
    result = runner.run(
        [c.model_dump() for c in plan.challenges()], lambda line: lines.append((time.perf_counter(), line))
    )
    assert result == {"segments": 4} and [line["index"] for _, line in lines] == [0, 1, 2, 3]
    for index in choose_segments(plan, 2, rng=np.random.default_rng(1)):
        challenge = plan.segment(index)
        commitment = Commitment.model_validate(lines[index][1]["commitment"])
        request = choose_openings(challenge, rng=np.random.default_rng(index))
        opening = Opening.model_validate(runner.open(index, request.model_dump()))
        assert verify(challenge, commitment, request, opening).ok
    report = analyse_series(sent, [t for t, _ in lines], plan.flops_per_segment, window=0.25, tolerance=0.9)
    assert len(report.tflops) == 4 and report.first_tflops > 0 and report.factor == 1.0


def test_a_segment_answered_with_another_segments_output_fails() -> None:
    plan = _plan()
    runner = SustainedRunner(ProverEngine("cpu", threads=1))
    lines: list[dict] = []
    runner.run([c.model_dump() for c in plan.challenges()], lines.append)
    challenge = plan.segment(1)
    request = choose_openings(challenge, rng=np.random.default_rng(0))
    forged = runner.open(0, request.model_dump() | {"challenge_id": plan.segment(0).challenge_id})
    forged["challenge_id"] = challenge.challenge_id
    verdict = verify(
        challenge,
        Commitment.model_validate(lines[0]["commitment"] | {"challenge_id": challenge.challenge_id}),
        request,
        Opening.model_validate(forged),
    )
    assert not verdict.ok


@pytest.mark.parametrize(
    ("durations", "throttled", "factor"),
    [
        ([1.0] * 10, False, 1.0),
        ([1.0] * 8 + [1.05, 1.05], False, 1.0),  # ratio 0.952 within 10 %
        ([1.0] * 8 + [1.6, 1.6], True, 0.625 / 0.9),  # ratio 0.625
        ([2.0] * 2 + [1.0] * 8, False, 1.0),  # slow start (warm-up) never penalised
    ],
)
def test_throttling_beyond_tolerance_lowers_the_factor(durations, throttled, factor) -> None:
    arrivals = list(np.cumsum(durations))
    report = analyse_series(0.0, arrivals, 2e12, window=0.2, tolerance=0.1)
    assert report.throttled is throttled
    assert report.factor == pytest.approx(factor)


def test_bad_series_and_oversized_runs_are_refused() -> None:
    with pytest.raises(SustainedError):
        analyse_series(0.0, [1.0], 1e12)
    with pytest.raises(SustainedError):
        analyse_series(0.0, [1.0, 1.0], 1e12)
    assert sustained_factor(float("nan")) == 0.0
    plan = _plan()
    with pytest.raises(EngineError, match="limit"):
        SustainedRunner(ProverEngine("cpu", threads=1), max_bytes=100).run(
            [c.model_dump() for c in plan.challenges()]
        )


def test_plan_sizes_segments_from_expected_throughput() -> None:
    plan = plan_sustained(670.0, "fp16", duration_s=60, segment_s=2, m=4096, rng=np.random.default_rng(0))
    assert plan.segments == 30
    assert plan.flops_per_segment / 670e12 == pytest.approx(2.0, rel=0.01)


def _series(tflops: list[float], flops: float = 2e12) -> list[float]:
    """Arrival times of segments that ran at ``tflops`` each (validator clock from 0)."""
    return list(np.cumsum([flops / t / 1e12 for t in tflops]))


def test_pacing_first_segments_never_raises_ratio() -> None:
    """A GPU that throttles to 60 % after a while paces its first segments to 60 %
    too, so its last/first ratio looked like 1.0. The reference is the validator-timed GEMM of the
    same GPU this round (x the segment efficiency): pacing the start hides nothing."""
    gemm_reference = 2.0 * 0.8  # this round's GEMM: 2 TFLOPS, segments honestly run at 80 % of it
    honest_throttler = _series([1.6] * 4 + [0.96] * 6)
    pacer = _series([0.96] * 10)
    old_pacer = analyse_series(0.0, pacer, 2e12)  # no reference: the old comparison with itself
    honest = analyse_series(0.0, honest_throttler, 2e12, reference_tflops=gemm_reference)
    paced = analyse_series(0.0, pacer, 2e12, reference_tflops=gemm_reference)
    assert old_pacer.ratio == pytest.approx(1.0) and not old_pacer.throttled
    assert honest.ratio == pytest.approx(0.6) and honest.throttled
    assert paced.ratio == pytest.approx(0.6) and paced.factor == pytest.approx(honest.factor)


def test_random_pacing_never_raises_the_ratio_above_the_reference_bound() -> None:
    """Seeded random loop: slowing any segments (first, last, any) never raises the ratio above what
    the unpaced run against the same reference gives, when the reference is at least the honest pace."""
    rng = np.random.default_rng(4)
    for _ in range(500):
        honest = list(rng.uniform(0.5, 2.0, size=int(rng.integers(4, 20))))
        reference = max(honest[: max(1, len(honest) // 5)]) * float(rng.uniform(1.0, 1.5))
        paced = [t * float(rng.uniform(0.2, 1.0)) if rng.random() < 0.5 else t for t in honest]
        before = analyse_series(0.0, _series(honest), 2e12, reference_tflops=reference)
        after = analyse_series(0.0, _series(paced), 2e12, reference_tflops=reference)
        assert after.ratio <= before.ratio + 1e-9


@pytest.mark.parametrize("reference", [None, 0.0, -1.0, float("nan"), float("inf"), True, "2"])
def test_an_unusable_reference_falls_back_to_the_first_window(reference) -> None:
    report = analyse_series(0.0, _series([1.0] * 8 + [0.5] * 2), 2e12, reference_tflops=reference)
    assert report.ratio == pytest.approx(0.5) and report.reference_tflops == 0.0


def _credit(factor: float) -> float:
    """The GPU part of a score (one GPU of credit 1.0) under a sustained factor."""
    from compute.scoring import HolisticConfig, HostEvidence, holistic_score

    return holistic_score([1.0], HostEvidence(), False, factor, HolisticConfig()).gpu_part


def _former(series: list[float], reference: float) -> float:
    """The factor of the former reference, max(first segments, fraction x GEMM): the finding."""
    report = analyse_series(0.0, series, 2e12)
    return sustained_factor(report.last_tflops / max(report.first_tflops, reference))


def _plays(s: float, throttle: float, segments: int = 10) -> dict[str, list[float]]:
    """A device whose segments honestly run at ``s`` x its GEMM figure (1 TFLOPS) and throttle to
    ``throttle`` after the first 40 %; the pacer's best plays against it (each only slows segments)."""
    hot = throttle * s
    honest = [s] * (segments * 2 // 5) + [hot] * (segments - segments * 2 // 5)
    return {
        "honest": honest,
        "paced flat from the start": [hot] * segments,
        "paced first window only": [hot] * 2 + honest[2:],
        "paced to the class floor": [min(t, s * 0.8) for t in honest],
        "ramped down": [min(t, max(hot, s - (s - hot) * k / 3)) for k, t in enumerate(honest)],
    }


@pytest.mark.parametrize(("name", "fraction"), [("CPU", 1.0), ("uncalibrated GPU", 0.8), ("GPU", 0.9)])
def test_pacing_never_raises_the_factor_on_any_class(name: str, fraction: float) -> None:
    """On the CPU class and on emulated GPU classes, for every segment/GEMM in [0.7, 1.3] and every
    throttle, no pacing of the segments raises the factor above the honest device's (+0.02 allowed,
    0 found): the factor rests on the last segments against this round's GEMM x the class's
    fraction, and pacing only slows segments."""
    gemm = 1.0
    reference = reference_fraction_for([name], {"CPU": 1.0, "GPU": 0.9}, 0.8) * gemm
    assert reference == fraction
    for s in np.linspace(0.7, 1.3, 13):
        for throttle in (0.5, 0.6, 0.7, 0.85, 0.95, 1.0):
            plays = _plays(float(s), throttle)
            honest = analyse_series(0.0, _series(plays.pop("honest")), 2e12, reference_tflops=reference)
            for play, tflops in plays.items():
                paced = analyse_series(0.0, _series(tflops), 2e12, reference_tflops=reference)
                assert paced.factor <= honest.factor + 0.02, (name, s, throttle, play)
                assert paced.factor <= honest.factor + 1e-12, (name, s, throttle, play)


@pytest.mark.parametrize(("throttle", "former", "now"), [(0.7, (0.78, 0.92), 0.92), (0.85, (0.94, 1.0), 1.0)])
def test_the_cpu_finding_pacing_paid_against_its_own_start_and_pays_nothing_now(
    throttle, former, now
) -> None:
    """CPU class (fraction 1.00), segment/GEMM measured 1.18: a device throttling to 70 % kept 0.92
    paced vs 0.78 honest against max(first segments, GEMM); at 85 %: 1.00 vs 0.94. Against the GEMM
    reference alone both get the same factor (the honest one no longer pays for its fast start)."""
    plays = _plays(1.18, throttle)
    honest, paced = _series(plays["honest"]), _series(plays["paced flat from the start"])
    assert (_former(honest, 1.0), _former(paced, 1.0)) == pytest.approx(former, abs=0.005)
    factors = [analyse_series(0.0, x, 2e12, reference_tflops=1.0).factor for x in (honest, paced)]
    assert factors == pytest.approx([now, now], abs=0.005)
    assert _credit(factors[1]) <= _credit(factors[0])


def test_a_claimed_class_can_only_raise_the_reference_fraction() -> None:
    fractions = {"H100 SXM": 0.9, "CPU": 1.0}
    assert reference_fraction_for(["H100 SXM"], fractions, 0.8) == 0.9
    assert reference_fraction_for(["H100 SXM", "RTX 4090"], fractions, 0.8) == 0.9  # a wrong claim: no lower
    assert reference_fraction_for([None, "RTX 4090"], fractions, 0.8) == 0.8  # not calibrated: the default
    assert reference_fraction_for([], fractions, 0.8) == 0.8


def test_a_throttled_verdict_is_confirmed_by_a_second_run_and_noise_is_forgiven() -> None:
    """Re-confirmation before a multi-round penalty: the second run is judged against the first run's
    reference, so a throttling device (hot from its start) shows the same ratio, a one-off dip is
    forgiven, and pacing the second run gains nothing."""
    reference = 2.0  # this round's GEMM x the class's fraction: the device's honest segment speed
    noisy = analyse_series(0.0, _series([2.0] * 8 + [1.6] * 2), 2e12, reference_tflops=reference)
    assert noisy.throttled
    clean = analyse_series(0.0, _series([2.0] * 10), 2e12, reference_tflops=confirmation_reference(noisy))
    assert confirmed(noisy, clean).factor == 1.0 and confirmed(noisy, clean).runs == 2
    throttler = analyse_series(0.0, _series([2.0] * 4 + [1.4] * 6), 2e12, reference_tflops=reference)
    again = analyse_series(0.0, _series([1.4] * 10), 2e12, reference_tflops=confirmation_reference(throttler))
    assert throttler.factor < 1.0 and confirmed(throttler, again).factor == pytest.approx(throttler.factor)
    paced = analyse_series(0.0, _series([1.0] * 10), 2e12, reference_tflops=confirmation_reference(throttler))
    assert confirmed(throttler, paced).factor == throttler.factor
