"""Round and weight loops end to end: real miners, simulated chain, validator store."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from validator_helpers import validator_context

from compute.chain import MetagraphSnapshot, NeuronInfo
from compute.scoring import ScoringConfig
from compute.store import PogResult, ScoreRecord, ScoreUpdate
from compute.validator import (
    BlockLoop,
    LoopRunner,
    RoundLoop,
    WeightsError,
    WeightSetter,
    WeightsLoop,
    chain_block_source,
    score_updates,
    select_targets,
    weights_from_scores,
)

SCORING = ScoringConfig(ema_alpha=0.5, missed_decay=0.5)


def neuron(uid: int, hotkey: str, axon: str | None) -> NeuronInfo:
    return NeuronInfo(uid, hotkey, "ck", 0.0, False, axon, True, 0)


def test_targets_skip_self_unserved_and_duplicate_ips() -> None:
    graph = MetagraphSnapshot(
        27,
        1,
        (
            neuron(0, "me", "10.0.0.1:1"),
            neuron(1, "a", "10.0.0.2:1"),
            neuron(2, "b", None),
            neuron(3, "c", "10.0.0.2:2"),
            neuron(4, "d", "10.0.0.3:1"),
        ),
    )
    assert [t.uid for t in select_targets(graph, "me", allow_same_ip=False)] == [1, 4]
    assert [t.uid for t in select_targets(graph, "me", allow_same_ip=True)] == [1, 3, 4]


def test_score_updates_ema_for_tested_decay_for_missed_reset_for_new_hotkey() -> None:
    scores = {
        1: ScoreRecord(1, "a", 4.0, 0),
        2: ScoreRecord(2, "b", 4.0, 0),
        3: ScoreRecord(3, "old", 4.0, 0),
    }
    results = [PogResult(9, 1, "a", ok=True, sample=2.0), PogResult(9, 3, "new", ok=False, sample=0.0)]
    miners = [neuron(1, "a", "x:1"), neuron(2, "b", None), neuron(3, "new", "y:1"), neuron(4, "me", "z:1")]
    assert score_updates(results, scores, miners, SCORING, own_hotkey="me") == [
        ScoreUpdate(1, "a", 3.0),
        ScoreUpdate(2, "b", 2.0),
        ScoreUpdate(3, "new", 0.0),
    ]


def test_weights_only_for_current_owners_of_a_uid() -> None:
    graph = MetagraphSnapshot(27, 1, (neuron(1, "a", None), neuron(2, "b2", None), neuron(3, "me", None)))
    scores = {1: ScoreRecord(1, "a", 3.0, 0), 2: ScoreRecord(2, "b", 9.0, 0), 3: ScoreRecord(3, "me", 1.0, 0)}
    assert weights_from_scores(scores, graph, "me") == {1: 1.0}


@pytest.fixture
def net(sim_net):
    return sim_net({"honest": None, "lazy": "forged", "noise": "garbage"})


@pytest.mark.slow
async def test_round_scores_honest_miner_and_zeroes_cheaters_then_weights_reach_chain(
    net, validator_client
) -> None:
    chain, store, wallet, uids = net
    own = wallet.hotkey.ss58_address
    ctx = validator_context(chain, store, validator_client, hotkey=own, scoring=SCORING)
    loop = RoundLoop(ctx, interval_blocks=1, concurrency=4, step_timeout=120, show_table=False)
    await loop.run_step(await chain_block_source(chain)())
    results = {r.uid: r for r in store.results(1)}
    assert results[uids["honest"]].ok and results[uids["honest"]].sample > 0
    assert not results[uids["lazy"]].ok and not results[uids["noise"]].ok
    scores = {uid: rec.score for uid, rec in store.scores().items()}
    assert scores[uids["honest"]] > 0 and scores[uids["lazy"]] == 0 and scores[uids["noise"]] == 0
    assert store.rounds_finished() == 1

    setter = WeightSetter(chain, wallet, store, attempts=3, backoff_s=1.5)
    await WeightsLoop(ctx, setter, interval_blocks=1).run_step(chain.block())
    validator_uid = chain.metagraph().uid_of(own)
    on_chain = chain.weights(validator_uid)
    assert set(on_chain) == {uids["honest"]} and on_chain[uids["honest"]] == pytest.approx(1.0)
    assert store.last_weights().weights == {uids["honest"]: 1.0}


@pytest.mark.slow
async def test_rate_limited_weights_are_retried_until_accepted(net) -> None:
    chain, store, wallet, uids = net
    setter = WeightSetter(chain, wallet, store, attempts=4, backoff_s=0.7)
    await setter.set({uids["honest"]: 1.0}, 1)
    await setter.set({uids["honest"]: 0.5, uids["lazy"]: 0.5}, 2)  # inside the rate limit: retried
    con = sqlite3.connect(store.path)
    attempts = [(ok, error) for ok, error in con.execute("SELECT ok, error FROM weights_set ORDER BY id")]
    con.close()
    assert attempts[0] == (1, None) and attempts[-1] == (1, None)
    assert attempts[1][0] == 0 and "RateLimited" in attempts[1][1]
    assert chain.weights(chain.metagraph().uid_of(wallet.hotkey.ss58_address)) == pytest.approx(
        {uids["honest"]: 0.5, uids["lazy"]: 0.5}, abs=1e-3
    )


async def test_weights_give_up_with_a_clear_error_when_chain_keeps_refusing(net) -> None:
    chain, store, wallet, uids = net
    setter = WeightSetter(chain, wallet, store, attempts=1)
    await setter.set({uids["honest"]: 1.0}, 1)
    with pytest.raises(WeightsError, match="after 1 attempts"):
        await setter.set({uids["honest"]: 1.0}, 2)
    assert store.last_weights(ok_only=False).ok is False


class _Flaky(BlockLoop):
    name = "flaky"
    interval_blocks = 1
    step_timeout = 0.3

    def __init__(self) -> None:
        self.calls = 0

    async def run_step(self, block: int) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("boom")
        if self.calls == 2:
            await asyncio.sleep(10)  # cut off by step_timeout


async def test_loop_survives_errors_and_hung_steps() -> None:
    blocks = iter(range(1, 1000))

    async def block() -> int:
        return next(blocks)

    flaky = _Flaky()
    runner = LoopRunner(block, [flaky], poll_s=0.01, watchdog_s=0.05)
    task = asyncio.create_task(runner.run())
    for _ in range(200):
        await asyncio.sleep(0.02)
        if flaky.calls >= 4:
            break
    runner.stop.set()
    await asyncio.wait_for(task, 5)
    assert flaky.calls >= 4
