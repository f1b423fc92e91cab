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

from compute.collateral import CPU_MACHINE
from compute.collateral.evidence import CheatEvidence
from compute.store import PogResult, ValidatorStore

FORGED = "fp16 proof rejected: gpu 0: Merkle path of row 3 does not match the root"  # the real round's words
WRONG = "fp32 proof rejected: gpu 0: 40/64 sampled entries off by up to 7.1 (tolerance 0.00195)"


@pytest.fixture
def story(tmp_path) -> Story:
    built = build_story(tmp_path, kill_after_s=3600, deposit_tao=3.0)
    yield built
    built.close()


def fail(store: ValidatorStore, story: Story, *reasons: str) -> None:
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
            created=time.time(),
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
    return story.contract().deposit_of(story.miner.hotkey.ss58_address, CPU_MACHINE).amount


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
