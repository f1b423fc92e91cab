"""The validators' schedule: random start offsets and the GPU-time budget shared by all validators."""

from __future__ import annotations

import random

import pytest
from validator_helpers import validator_context

from compute.scoring import ScoringConfig
from compute.validator import (
    RoundLoop,
    RoundSchedule,
    chain_block_source,
    check_probability,
    round_spread,
    validation_load,
)
from compute.validator.round.schedule import due_uids, start_offsets


def test_offsets_are_spread_over_the_window_and_differ_between_validators() -> None:
    uids = list(range(200))
    a = start_offsets(uids, 60.0, random.Random(1))
    b = start_offsets(uids, 60.0, random.Random(2))
    assert all(0.0 <= a[uid] < 60.0 for uid in uids)
    assert max(a.values()) > 50 and min(a.values()) < 10  # uses the whole window
    same_second = sum(abs(a[uid] - b[uid]) < 1.0 for uid in uids)
    assert same_second < 20  # two validators rarely reach the same miner in the same second
    assert start_offsets(uids, 0.0, random.Random(1)) == dict.fromkeys(uids, 0.0)


@pytest.mark.parametrize(
    ("validators", "expected"),
    [(1, 1.0), (16, 0.45), (64, 0.1125), (0, 1.0)],  # 0.05 x 4320 / (V x 30)
)
def test_test_chance_keeps_all_validators_within_the_budget(validators: int, expected: float) -> None:
    p = check_probability(validators, 4320.0, 30.0, 0.05)
    assert p == pytest.approx(expected)
    if validators:
        assert validation_load(validators, 4320.0, 30.0, p) <= 0.05 + 1e-12 or p == 1.0
    assert check_probability(64, 4320.0, 30.0, 0.0) == 1.0  # budget off: every round


def test_due_draws_match_the_chance() -> None:
    drawn = due_uids(range(10_000), 0.1125, random.Random(3))
    assert 1000 < len(drawn) < 1250
    assert due_uids(range(5), 1.0, random.Random(3)) == set(range(5))


def test_spread_leaves_one_miner_timeout_before_the_round_ends() -> None:
    assert round_spread(None, 4320.0, 3888.0, 300.0) == pytest.approx(2160.0)  # half the interval
    assert round_spread(10.0, 4320.0, 3888.0, 300.0) == 10.0
    assert round_spread(None, 1.0, 600.0, 300.0) == pytest.approx(0.5)
    assert round_spread(1000.0, 60.0, 600.0, 300.0) == pytest.approx(240.0)  # clamped
    assert round_spread(None, 60.0, 100.0, 300.0) == 0.0


@pytest.fixture
def net(sim_net):
    return sim_net({"honest": None, "lazy": "forged"})


@pytest.mark.slow
async def test_budget_skips_scored_miners_without_decay_but_a_failing_miner_is_always_retested(
    net, validator_client
) -> None:
    # The budget allows almost no tests (p ~ 0): round 1 still tests everyone (nobody is scored
    # yet); round 2 leaves the honest miner's score untouched (not drawn is not missed) while the
    # cheater, scored 0, is due again -- failing buys a miner no rest from proofs.
    chain, store, wallet, uids = net
    ctx = validator_context(
        chain,
        store,
        validator_client,
        hotkey=wallet.hotkey.ss58_address,
        scoring=ScoringConfig(ema_alpha=0.5, missed_decay=0.5),
    )
    schedule = RoundSchedule(
        spread_s=1.0, load_budget=0.05, check_seconds=30.0, interval_s=1.0, rng=random.Random(5)
    )
    loop = RoundLoop(
        ctx, interval_blocks=1, concurrency=4, step_timeout=120, schedule=schedule, show_table=False
    )
    block = chain_block_source(chain)
    await loop.run_step(await block())
    assert {r.uid for r in store.results(1)} == set(uids.values())
    honest_score = store.scores()[uids["honest"]].score
    assert honest_score > 0 and store.scores()[uids["lazy"]].score == 0
    # Both test miners live on 127.0.0.1, which the one-device check rightly suspects as one box;
    # clear that to see the budget alone.
    ctx.oversight.suspects = []
    await loop.run_step(await block())
    assert {r.uid for r in store.results(2)} == {uids["lazy"]}
    assert store.scores()[uids["honest"]].score == pytest.approx(honest_score)
    # Suspected duplicates are always due (tested together), whatever the budget draws.
    ctx.oversight.suspects = [frozenset(uids.values())]
    await loop.run_step(await block())
    assert {r.uid for r in store.results(3)} == set(uids.values())
