"""A miner kills a renter's lease inside its term; the renter is made whole, through real code.

The renter rents with ``register.py allocate --register.renter_evm`` (the rental kept as both
sides signed it), the killer miner stops the lease a second later, the renter runs ``register.py
report`` against one validator's evidence surface; three validators' real desks take the report
from each other, probe the lease the miner named, sign probes, one assembles the evidence, and the
attestations of validators holding half the stake execute the slash on the real contract (the local
EVM over JSON-RPC); ``register.py claim`` pays the renter. Variants: a renter that released its
lease itself gets nothing, and one validator alone never reaches the quorum.
"""

from __future__ import annotations

import pytest
from story import TAO, Story, build_story, start_desks

from compute.collateral.chain import KIND_FAILED_RENTAL, SlashProposal
from compute.collateral.evidence import evidence_hash, incident_of
from compute.collateral.lease import check_report
from compute.operator import EXIT_OK, EXIT_REFUSED, EXIT_USAGE


@pytest.fixture
def story(tmp_path) -> Story:
    built = build_story(tmp_path)
    yield built
    built.close()


def rent(story: Story) -> str:
    code, body = story.register(
        "allocate",
        "--hotkey",
        story.miner.hotkey.ss58_address,
        "--duration",
        "2h",
        "--register.renter_evm",
        story.renter_evm.address,
    )
    assert code == EXIT_OK, body
    return body["lease"]["lease_id"]


@pytest.mark.slow
def test_a_killed_lease_is_slashed_by_the_quorum_and_the_renter_claims_it(story: Story) -> None:
    start_desks(story)
    code, body = story.register(
        "allocate", "--hotkey", story.miner.hotkey.ss58_address, "--register.renter_evm", "0x12"
    )
    assert code == EXIT_USAGE and "--register.renter_evm" in body["error"]["message"]
    lease = rent(story)
    assert (story.root / "register" / "rentals" / f"{lease}.json").is_file()
    code, body = story.register("report", lease)
    assert code == EXIT_USAGE and "--register.validators" in body["error"]["message"]
    code, body = story.register("report", lease, "--register.validators", story.validators[0].url)
    assert code == EXIT_OK and body["reported_to"][0]["accepted"], body
    contract = story.contract()
    renter = story.renter_evm.address

    assert story.play(lambda: contract.owed(renter) > 0, timeout_s=90, then_s=3), "no slash"
    assert contract.owed(renter) == TAO  # one day of rent of the one-unit machine, all to the renter
    digests = {d for v in story.validators for d in v.parts.desk.book.all_evidence()}
    assert len(digests) == 1  # one dead lease, one evidence document, one slash
    assert contract.deposit_of(story.miner.hotkey.ss58_address).slashes == 1
    assert contract.deposit_of(story.miner.hotkey.ss58_address).amount == 0  # 1 TAO slashed
    outcomes = [
        v.parts.desk.book.outcome(digest)
        for v in story.validators
        for digest in v.parts.desk.book.all_evidence()
    ]
    assert any(o and "slash executed" in o for o in outcomes), outcomes
    # the money moved on several validators' own observations: evidence may be assembled from the
    # probes of validators holding MIN_PROBE_SHARE (one 46 % validator alone, if the others' probe
    # runs had not yet lasted dead_s: a CI run under load), but the slash needs attestations of half
    # the stake, each attester with its own dead probe run (no one validator here holds half)
    (signed,) = {d: s for v in story.validators for d, s in v.parts.desk.book.all_evidence().items()}.values()
    evidence = signed.evidence
    lease = check_report(evidence.report())
    proposal = SlashProposal(
        evidence.miner_hotkey, KIND_FAILED_RENTAL, incident_of(evidence), evidence_hash(evidence),
        evidence.gpus, lease.renter_evm,
    )  # fmt: skip
    assert contract.proposal(proposal).attesters >= 2, contract.proposal(proposal)

    before = story.evm.balance(renter)
    code, body = story.register(
        "claim",
        "--collateral.rpc",
        story.evm.url,
        "--collateral.address",
        story.evm.address,
        env={"COLLATERAL_EVM_KEY": bytes(story.renter_evm.key).hex()},
    )
    assert code == EXIT_OK, body
    assert body["claimed_wei"] == TAO and contract.owed(renter) == 0
    assert story.evm.balance(renter) > before + TAO * 99 // 100  # compensated, less the claim's gas
    code, body = story.register(
        "claim",
        "--collateral.rpc",
        story.evm.url,
        "--collateral.address",
        story.evm.address,
        env={"COLLATERAL_EVM_KEY": bytes(story.renter_evm.key).hex()},
    )
    assert code == EXIT_REFUSED and "owes nothing" in body["error"]["message"]


@pytest.mark.slow
def test_a_renter_that_released_its_lease_itself_is_owed_nothing(tmp_path) -> None:
    story = build_story(tmp_path, kill_after_s=3600)  # this miner keeps its leases
    try:
        start_desks(story)
        lease = rent(story)
        assert story.register("deallocate", lease)[0] == EXIT_OK  # the renter ends it, then cries foul
        code, body = story.register("report", lease, "--register.validators", story.validators[0].url)
        assert code == EXIT_OK, body  # both signatures are real: the report is taken and probed
        books = [v.parts.desk.book for v in story.validators]
        released = story.play(lambda: all(b.outcome(lease) == "released by its renter" for b in books))
        assert released, [b.outcome(lease) for b in books]
        assert all(not b.all_evidence() for b in books)
        contract = story.contract()
        assert contract.owed(story.renter_evm.address) == 0
        assert contract.deposit_of(story.miner.hotkey.ss58_address).amount == TAO
    finally:
        story.close()


@pytest.mark.slow
def test_one_validator_below_kappa_cannot_slash_even_with_a_second_probe(tmp_path) -> None:
    """Validators 1 and 2 both see the lease dead (two probes: evidence is made), but only validator
    1 (44 % of the stake) attests: the proposal stays open and nobody is paid."""
    story = build_story(tmp_path)
    try:
        start_desks(story, only=(0, 1), keys=(0,))
        lease = rent(story)
        assert story.register("report", lease, "--register.validators", story.validators[0].url)[0] == EXIT_OK
        books = [v.parts.desk.book for v in story.validators]

        def attested() -> bool:
            return any(b.outcome(d) == "attested" for b in books for d in b.all_evidence())

        assert story.play(attested, then_s=3)  # and more steps change nothing
        contract = story.contract()
        assert contract.owed(story.renter_evm.address) == 0
        assert contract.deposit_of(story.miner.hotkey.ss58_address).amount == TAO
    finally:
        story.close()
