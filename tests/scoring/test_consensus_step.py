"""The consensus step maps noise-level differences together and never raises a credit."""

from __future__ import annotations

import math
import random

import pytest

from compute.chain import MetagraphSnapshot, NeuronInfo
from compute.scoring import ScoringError
from compute.scoring.consensus import consensus_credit, consensus_credits
from compute.store import ScoreRecord
from compute.validator import weights_from_scores


@pytest.mark.parametrize(
    ("credit", "step", "expected"),
    [
        (1.0, 0.05, 1.0),  # grid point stays
        (1.04, 0.05, 1.0),  # below 1.05: floored to 1
        (1.05, 0.05, 1.05),  # the next grid point
        (1.2, 0.1, 1.1),  # 1.1 <= 1.2 < 1.21
        (0.95, 0.05, 1.05**-2),  # below 1: 1.05^-1 = 0.952 > 0.95, so 1.05^-2 = 0.907
        (3.3, 0.0, 3.3),  # step off: identity
        (0.0, 0.05, 0.0),
        (-1.0, 0.05, 0.0),
        (math.nan, 0.05, 0.0),
        (math.inf, 0.05, 0.0),
    ],
)
def test_floor_onto_the_grid(credit: float, step: float, expected: float) -> None:
    assert consensus_credit(credit, step) == pytest.approx(expected)


def test_never_raises_and_never_reorders_random_credits() -> None:
    # The soundness argument: a cheater's credit can only go down, and no one overtakes anyone.
    rng = random.Random(7)
    for step in (0.01, 0.05, 0.2, 1.0):
        credits = sorted(rng.uniform(1e-6, 10.0) for _ in range(500))
        stepped = [consensus_credit(c, step) for c in credits]
        assert all(s <= c for s, c in zip(stepped, credits, strict=True))
        assert all(a <= b for a, b in zip(stepped, stepped[1:], strict=False))
        assert all(s >= c / (1 + step) * (1 - 1e-9) for s, c in zip(stepped, credits, strict=True))


def test_noise_inside_one_step_lands_on_one_level() -> None:
    # Two validators measure 1.061 and 1.090 for the same miner: different credits, same level.
    assert consensus_credit(1.061, 0.05) == consensus_credit(1.090, 0.05) == pytest.approx(1.05)


def test_bad_step_is_refused() -> None:
    for step in (-0.1, 1.5, math.nan, True):
        with pytest.raises(ScoringError, match="credit step"):
            consensus_credit(1.0, step)  # type: ignore[arg-type]


def test_weights_apply_the_step_and_a_cheater_never_overtakes_an_honest_miner() -> None:
    # Cheapest cheat: claim a tiny edge over an honest miner; the step can tie them, never invert.
    graph = MetagraphSnapshot(
        27, 1, tuple(NeuronInfo(uid, f"h{uid}", "ck", 0.0, False, None, True, 0) for uid in (1, 2, 3))
    )
    scores = {
        1: ScoreRecord(1, "h1", 1.00, 0),  # honest
        2: ScoreRecord(2, "h2", 0.99, 0),  # cheater proven slightly below
        3: ScoreRecord(3, "h3", 2.00, 0),
    }
    plain = weights_from_scores(scores, graph, None)
    stepped = weights_from_scores(scores, graph, None, credit_step=0.05)
    assert stepped[2] <= stepped[1]
    assert plain[2] < plain[1]
    assert consensus_credits({1: 1.0, 2: 0.99}, 0.05) == {1: 1.0, 2: pytest.approx(1.05**-1)}
