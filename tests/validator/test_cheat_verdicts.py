"""Which verdicts of the real round are cheats proven by mathematics (collateral's cheat evidence).

The round runs for real against cheating workers (signed miner app, embedded backend, real SSH, the
worker replaced in its lease): a wrong product, forged roots and a skipped memory pass are proven
cheats; a timeout, garbage, hostile text, an unreachable miner are not (they score 0, nothing more).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from validator_helpers import small_params

from compute.scoring import ScoringConfig, load_gpu_table
from compute.store import PogResult
from compute.validator import MinerCheck, MinerTarget, check_miner
from compute.validator.collateral.cheats import proven_cheat, verdict_digest

TABLE = load_gpu_table()
SCORING = ScoringConfig()
PROVEN = {
    "partial": "fp16 proof rejected",
    "forged": "fp16 proof rejected",
    "memskip": "memory proof rejected",
}
NOT_PROVEN = ("garbage", "hostiletext", "silent")


@pytest.mark.parametrize("mode", sorted(PROVEN) + list(NOT_PROVEN))
@pytest.mark.slow
async def test_only_a_wrong_answer_is_a_proven_cheat(start_miner, validator_client, mode: str) -> None:
    miner = start_miner(f"cheat-{mode}", cheat=mode)
    params = small_params(miner_timeout=4.0) if mode == "silent" else small_params()
    result = await check_miner(
        MinerCheck(validator_client, MinerTarget(1, miner.hotkey, miner.endpoint), params, TABLE, SCORING)
    )
    assert result is not None and not result.ok and result.sample == 0.0, result
    proven = proven_cheat(result)
    if mode in PROVEN:
        assert proven and proven[0].startswith(PROVEN[mode]), result.reasons
    else:
        assert proven == (), result.reasons


async def test_an_unreachable_miner_is_no_cheat(validator_client) -> None:
    dead = MinerTarget(3, "5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM", "127.0.0.1:9")
    result = await check_miner(MinerCheck(validator_client, dead, small_params(retries=0), TABLE, SCORING))
    assert result is not None and not result.ok and proven_cheat(result) == ()


WRONG = "fp16 proof rejected: gpu 0: 12/64 sampled entries off by up to 3.5 (tolerance 0.0123)"


@pytest.mark.parametrize(
    "ok, rented, reasons, proven",
    [
        (False, False, (WRONG,), True),
        (False, False, ("fp32 proof rejected: gpu 1: Merkle path of row 7 does not match the root",), True),
        (
            False,
            False,
            ("sustained segment 2 rejected: gpu 0: opened rows [1] != requested [2]; " + WRONG[21:],),
            True,
        ),
        (
            False,
            False,
            ("GPU 1 alone: proof rejected: gpu 0: pass 3: vector does not match the committed leaf",),
            True,
        ),
        (
            False,
            False,
            ("memory proof rejected: gpu 0: passes [2, 5] wrong in 9 sampled entries (exact check)",),
            True,
        ),
        (False, False, ("fp16 proof rejected: gpu 0: row 3: invalid base64",), False),  # garbled, not wrong
        (False, False, ("fp16 proof rejected: malformed input: ValueError: x",), False),
        (False, False, ("worker error: " + WRONG,), False),  # a worker's words posing as a verdict
        (False, False, ("miner test exceeded 60s",), False),
        (False, False, ("memory proof: too slow: gpu 0: 3 GB/s",), False),
        (False, True, (WRONG,), False),  # a rented machine's record
        (True, False, (WRONG,), False),
    ],
)
def test_the_allowlist_of_proven_reasons(
    ok: bool, rented: bool, reasons: tuple[str, ...], proven: bool
) -> None:
    result = PogResult(4, 2, "hk", ok=ok, sample=0.0, reasons=reasons, rented=rented)
    assert bool(proven_cheat(result)) is proven


def test_the_verdict_digest_is_stable_and_names_the_test() -> None:
    one = PogResult(4, 2, "hk", ok=False, sample=0.0, reasons=(WRONG,), created=1.5, timings={"total_s": 2})
    assert verdict_digest(one) == verdict_digest(replace(one, models=("x",)))  # not part of the record
    assert verdict_digest(one) != verdict_digest(replace(one, round_id=5))


async def test_a_real_rounds_forged_proof_becomes_cheat_evidence_in_the_desk(
    start_miner, validator_client, tmp_path
) -> None:
    """The round's own record of a forged proof, kept in the validator's real store, is what the
    collateral desk assembles cheat evidence from (for the machine it verified before)."""
    pytest.importorskip("web3", reason="the collateral extra is not installed")
    from compute.chain import MetagraphSnapshot, NeuronInfo
    from compute.store import ValidatorStore
    from compute.validator.collateral.book import CollateralBook
    from compute.validator.collateral.reproduce import CheatJudge

    miner = start_miner("cheat-forged-desk", cheat="forged")
    result = await check_miner(
        MinerCheck(
            validator_client,
            MinerTarget(1, miner.hotkey, miner.endpoint),
            small_params(round_id=2),
            TABLE,
            SCORING,
        )
    )
    assert result is not None and proven_cheat(result)
    store = ValidatorStore(tmp_path / "validator.db")
    try:
        for round_id, record in (
            (1, PogResult(1, 1, miner.hotkey, True, 0.01, gpu_count=0, created=result.created - 60)),
            (2, result),
        ):
            started = store.begin_round(round_id)
            store.record_result(replace(record, round_id=started.round_id))
            store.finish_round(started.round_id, [])
        keypair = validator_client.wallet_obj.hotkey
        book = CollateralBook(tmp_path / "book")
        judge = CheatJudge(keypair, book, store, 86_400.0, lambda: result.created + 1)
        graph = MetagraphSnapshot(
            27, 1, (NeuronInfo(1, miner.hotkey, miner.hotkey, 1.0, False, None, True, 0),)
        )
        made = judge.assemble(graph, result.created + 1)
        assert len(made) == 1
        signed = book.evidence(made[0])
        assert signed is not None and signed.served_by == keypair.ss58_address
        assert signed.evidence.reasons == proven_cheat(result) and signed.evidence.gpus == 1
    finally:
        store.close()
