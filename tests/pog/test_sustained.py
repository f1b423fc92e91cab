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
    plan_sustained,
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
