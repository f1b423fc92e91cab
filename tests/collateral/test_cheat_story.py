"""A cheat is slashed only when the validators that attest it each proved it in their own round.

Three validators' real collateral parts (desk, book, surface, peers, judging, reproduction) over
their own real stores, the contract on the local EVM over JSON-RPC (``story``). The PoG round itself
is not run here: each store holds the record the real round writes (``tests/validator/
test_cheat_verdicts.py`` plays the real round against the real cheating workers and shows which of
its records are proven cheats). Stakes: 44 %, 29 %, 22 % of the validator stake (the renter's 4 %).
"""

from __future__ import annotations

import time

import pytest
from story import TAO, Story, build_story, record_verified, start_desks, verified

from compute.collateral.evidence import CheatEvidence
from compute.store import PogResult, ValidatorStore

FORGED = "fp16 proof rejected: gpu 0: Merkle path of row 3 does not match the root"  # the real round's words
WRONG = "fp32 proof rejected: gpu 0: 40/64 sampled entries off by up to 7.1 (tolerance 0.00195)"


@pytest.fixture
def story(tmp_path) -> Story:
    built = build_story(tmp_path, kill_after_s=3600, deposit_tao=3.0)
    yield built
    built.close()


def fail(store: ValidatorStore, story: Story, *reasons: str, created: float | None = None) -> None:
    """What the round records for a failed test of the miner (``params.failed_result``)."""
    record = store.begin_round(2)
    hotkey = story.miner.hotkey.ss58_address
    store.record_result(
        PogResult(
            record.round_id,
            story.miner_uid,
            hotkey,
            ok=False,
            sample=0.0,
            reasons=reasons,
            created=time.time() if created is None else created,
        )
    )
    store.finish_round(record.round_id, [])


def cheat_outcomes(story: Story) -> list[list[str | None]]:
    """Per validator, its outcome of each cheat evidence it holds."""
    out = []
    for v in story.validators:
        book = v.parts.desk.book
        out.append(
            [book.outcome(d) for d, s in book.all_evidence().items() if isinstance(s.evidence, CheatEvidence)]
        )
    return out


def standing(story: Story) -> int:
    return story.contract().deposit_of(story.miner.hotkey.ss58_address).amount


@pytest.mark.slow
def test_a_cheat_two_validators_proved_is_slashed_once_partially_and_burned(story: Story) -> None:
    start_desks(story)
    fail(story.validators[0].store, story, FORGED)  # 44 %: proves the cheat
    fail(story.validators[1].store, story, WRONG)  # 29 %: proves it too, in its own round
    contract = story.contract()
    assert story.play(lambda: standing(story) < 3 * TAO, timeout_s=60, then_s=3), cheat_outcomes(story)
    assert standing(story) == 2 * TAO  # one day of rent of the one-unit machine: partial first
    assert contract.burned() == TAO and contract.owed(story.renter_evm.address) == 0  # nothing to a renter
    digests = {d for v in story.validators for d, s in v.parts.desk.book.all_evidence().items()}
    assert len(digests) == 1  # the second validator attested the first's evidence, made none of its own
    first, second, third = cheat_outcomes(story)
    assert any("slash executed" in (o or "") for o in first + second), (first, second)
    assert third == [
        None
    ]  # no own verdict yet: it waits for its own draw of the miner (attests later or never)


@pytest.mark.slow
def test_one_validator_alone_cannot_get_a_cheat_slashed_and_peers_whose_proof_passed_refuse(
    story: Story,
) -> None:
    """The largest validator (44 %) says an honest miner cheated; the others proved the machine
    themselves (it passed) and refuse once their window closes: nothing is slashed."""
    start_desks(story, cheat_window=3.0)
    fail(story.validators[0].store, story, FORGED)
    for v in story.validators[1:]:
        record_verified(v.store, verified(story.miner_uid, story.miner.hotkey.ss58_address, round_id=2))

    def refused() -> bool:
        _, *others = cheat_outcomes(story)
        return all(o and o[0] and o[0].startswith("refused: not reproduced") for o in others)

    assert story.play(refused, timeout_s=30, then_s=1), cheat_outcomes(story)
    first, second, third = cheat_outcomes(story)
    assert first == ["attested"]  # its own vote, below kappa
    assert second == third == ["refused: not reproduced: this validator's own proof of the machine passed"]
    assert standing(story) == 3 * TAO and story.contract().burned() == 0


@pytest.mark.slow
def test_timeouts_absence_and_garbage_never_become_cheat_evidence(story: Story) -> None:
    start_desks(story)
    for v in story.validators:
        fail(
            v.store,
            story,
            "miner test exceeded 300s",
            "round deadline reached before the test",
            "miner absent at the lockstep window's gate",
            "fp16 proof rejected: gpu 0: row 2: invalid base64",
            "worker error: " + FORGED,  # the worker's own words posing as a verdict
        )
    story.play(lambda: False, timeout_s=3)
    assert cheat_outcomes(story) == [[], [], []]
    assert standing(story) == 3 * TAO


def attested_by(story: Story, index: int) -> bool:
    book = story.validators[index].parts.desk.book
    return any(book.outcome(d) == "attested" for d in book.all_evidence())


@pytest.mark.slow
def test_a_cheat_proven_by_the_quorum_hours_apart_is_slashed_and_the_cheater_keeps_only_the_rest(
    story: Story,
) -> None:
    """The largest validator (44 %) proves the cheat; the cheater asks its whole deposit back at
    once; the second validator (29 %) meets the cheater in its own round two hours later on the
    chain's clock (a proposal of the 3600 s expiry once deployed here was closed by then). The
    proposal outlives the cheat window: the quorum slashes, and the reclaim pays only what is left."""
    start_desks(story)
    hotkey = story.miner.hotkey.ss58_address
    fail(story.validators[0].store, story, FORGED, created=time.time() - 2 * 3600)
    story.contract(story.miner_evm).request_reclaim(hotkey, 3 * TAO)  # the cheater runs
    assert story.play(lambda: attested_by(story, 0), timeout_s=30), cheat_outcomes(story)
    story.evm.chain.advance(2 * 3600)  # two hours on the chain's clock
    fail(story.validators[1].store, story, WRONG)  # the second validator's own round, now
    assert story.play(lambda: standing(story) < 3 * TAO, timeout_s=30, then_s=2), cheat_outcomes(story)
    contract = story.contract()
    assert standing(story) == 2 * TAO and contract.burned() == TAO
    assert contract.deposit_of(hotkey).slashes == 1
    story.evm.chain.advance(contract.config().reclaim_delay_s)
    before = story.evm.balance(story.miner_evm.address)
    paid = story.contract(story.miner_evm).finalize_reclaim(hotkey)
    assert story.evm.balance(story.miner_evm.address) == before + 2 * TAO - paid.fee_wei  # 2 of 3, not 3


@pytest.mark.slow
def test_an_expired_cheat_proposal_blocks_no_fresh_evidence_and_the_quorum_slashes_it(story: Story) -> None:
    """Nobody followed the first validator within the proposal's expiry; later the second validator
    proves the cheat itself: its attestation opens the proposal again (its bond), the first joins
    the fresh opening, and the quorum slashes. The expired opening's bond went to the miner."""
    start_desks(story)
    hotkey = story.miner.hotkey.ss58_address
    fail(story.validators[0].store, story, FORGED)
    assert story.play(lambda: attested_by(story, 0), timeout_s=30), cheat_outcomes(story)
    contract = story.contract()
    story.evm.chain.advance(contract.config().proposal_ttl_s + 60)  # the opening expires unfollowed
    story.play(lambda: False, timeout_s=2)
    assert standing(story) == 3 * TAO and attested_by(story, 0)  # expired, still watched, not slashed
    fail(story.validators[1].store, story, WRONG)  # fresh: the second validator's own round
    assert story.play(lambda: standing(story) < 3 * TAO, timeout_s=30, then_s=2), cheat_outcomes(story)
    assert standing(story) == 2 * TAO and contract.deposit_of(hotkey).slashes == 1
    bond = contract.config().bond
    assert contract.owed(story.miner_evm.address) == bond  # the expired opening's bond: the miner's
    assert contract.owed(story.validators[1].evm.address) == bond  # the re-opener was right: returned


def test_a_validator_refuses_to_run_on_a_contract_whose_windows_do_not_fit() -> None:
    """The deployment that once ran here: a 3600 s proposal expiry and reclaim delay under the
    validator's one-day cheat window and 30-day leases."""
    from compute.collateral import CollateralError, Windows
    from compute.collateral.chain import CollateralClient, CollateralConfig
    from compute.collateral.deploy import deploy_stack
    from compute.collateral.devchain import local_chain
    from compute.collateral.settings import CollateralSettings
    from compute.validator.collateral.wiring import check_windows

    chain = local_chain()
    config = CollateralConfig(
        rate_per_gpu_day=TAO, min_deposit=TAO, reclaim_delay_s=3600, proposal_ttl_s=3600
    )
    loose = Windows(cheat_window_s=60, dead_s=60, max_term_s=60, assembly_s=60)
    stack = deploy_stack(chain.w3, chain.accounts[0], config, 27, doubles=True, windows=loose)
    client = CollateralClient(chain.w3, stack.collateral, chain.accounts[1])
    settings = CollateralSettings(rpc="http://127.0.0.1:1", address=stack.collateral)
    with pytest.raises(CollateralError, match="cheat window") as refused:
        check_windows(client, settings)
    assert "longest lease term" in str(refused.value)
    short = CollateralSettings(
        rpc="http://127.0.0.1:1", address=stack.collateral, cheat_window=600, max_term=600, dead_seconds=60
    )
    with pytest.raises(CollateralError, match="cheat window"):
        check_windows(client, short)  # 600 + an hour of assembly is still past a 3600 s expiry
