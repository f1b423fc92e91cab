"""Scoring math: moving averages, normalisation (table-driven)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from compute.scoring import (
    ScoringConfig,
    ScoringError,
    decay_missed,
    decay_score,
    ema_update,
    normalise,
    round_sample,
    update_score,
)

CFG = ScoringConfig()


def test_config_defaults_match_the_documented_policy() -> None:
    assert (CFG.max_gpus_counted, CFG.rented_bonus, CFG.ema_alpha, CFG.missed_decay) == (8, 0.0, 0.3, 0.9)
    assert 0 < CFG.min_score < 1e-3


@pytest.mark.parametrize(
    "kwargs",
    [{"max_gpus_counted": 0}, {"ema_alpha": 0.0}, {"ema_alpha": 1.5}, {"rented_bonus": -0.1}, {"colour": 1}],
)
def test_config_rejects_out_of_range_values(kwargs: dict) -> None:
    with pytest.raises(ValidationError):
        ScoringConfig(**kwargs)


@pytest.mark.parametrize(
    ("prev", "sample", "alpha", "expected"),
    [
        (None, 10.0, 0.3, 10.0),  # first sample taken as is
        (10.0, 10.0, 0.3, 10.0),
        (10.0, 0.0, 0.3, 7.0),  # one failed round dents, does not erase
        (0.0, 10.0, 0.3, 3.0),
        (10.0, 20.0, 1.0, 20.0),
        (10.0, math.nan, 0.3, 7.0),  # garbage sample counts as 0
        (10.0, -5.0, 0.3, 7.0),
        (math.nan, 10.0, 0.5, 5.0),  # garbage history counts as 0
        (None, math.inf, 0.3, 0.0),
    ],
)
def test_ema_update(prev, sample, alpha: float, expected: float) -> None:
    assert ema_update(prev, sample, alpha) == pytest.approx(expected)


@pytest.mark.parametrize("alpha", [0.0, -0.1, 1.01, math.nan, True])
def test_ema_rejects_bad_alpha(alpha) -> None:
    with pytest.raises(ScoringError, match="alpha"):
        ema_update(1.0, 1.0, alpha)


def test_sustained_failures_drive_the_score_to_zero() -> None:
    score: float | None = 13.2
    for _ in range(60):
        score = update_score(score, round_sample(13.2, passed=False), CFG)
    assert score == 0.0  # 0.7**60 * 13.2 < min_score -> snapped


def test_a_cheating_round_costs_more_than_it_could_gain() -> None:
    honest = update_score(update_score(3.3, round_sample(3.3, True), CFG), round_sample(3.3, True), CFG)
    caught = update_score(update_score(3.3, round_sample(26.4, False), CFG), round_sample(3.3, True), CFG)
    assert caught < honest


def test_recovery_after_one_failure() -> None:
    score = update_score(10.0, round_sample(10.0, passed=False), CFG)
    for _ in range(15):
        score = update_score(score, round_sample(10.0, passed=True), CFG)
    assert score == pytest.approx(10.0, rel=0.01)


@pytest.mark.parametrize(
    ("prev", "factor", "expected"), [(None, 0.9, 0.0), (10.0, 0.9, 9.0), (10.0, 0.0, 0.0), (10.0, 1.0, 10.0)]
)
def test_decay_missed(prev, factor: float, expected: float) -> None:
    assert decay_missed(prev, factor) == pytest.approx(expected)


@pytest.mark.parametrize("factor", [-0.1, 1.1, math.nan])
def test_decay_rejects_bad_factor(factor: float) -> None:
    with pytest.raises(ScoringError, match="decay factor"):
        decay_missed(1.0, factor)


def test_decay_score_uses_config_and_floor() -> None:
    assert decay_score(10.0, CFG) == pytest.approx(9.0)
    assert decay_score(1e-6, CFG) == 0.0


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ({}, {}),
        ({1: 0.0, 2: 0.0}, {1: 0.0, 2: 0.0}),
        ({1: 1.0, 2: 3.0}, {1: 0.25, 2: 0.75}),
        ({1: 2.0, 2: -5.0, 3: math.nan, 4: math.inf}, {1: 1.0, 2: 0.0, 3: 0.0, 4: 0.0}),
        ({7: 1e308, 8: 1e308}, {7: 0.5, 8: 0.5}),
        ({1: -1.0}, {1: 0.0}),
    ],
)
def test_normalise(scores: dict[int, float], expected: dict[int, float]) -> None:
    result = normalise(scores)
    assert result == pytest.approx(expected)
    assert math.fsum(result.values()) in (0.0, pytest.approx(1.0))


@pytest.mark.parametrize(
    ("score", "passed", "expected"), [(5.0, True, 5.0), (5.0, False, 0.0), (math.nan, True, 0.0)]
)
def test_round_sample(score: float, passed: bool, expected: float) -> None:
    assert round_sample(score, passed) == expected
