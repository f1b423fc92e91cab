"""The attacker's best variants against failed-rental slashes, played through the real parts.

Three validators' real desks and surfaces (44 / 29 / 22 % of the stake; the renter's permitted
hotkey 4 %), the killer or an honest miner's real API, ``register.py`` as the renter, the contract
on the local EVM over JSON-RPC (``story``). The attacker signs with real keys, serves its evidence
from a real surface the honest desks read, and attests on the contract itself.
"""

from __future__ import annotations

import time

import pytest
from story import (
    TAO,
    Story,
    associate,
    attacker_surface,
    build_story,
    permitted,
    start_desks,
)
from test_failed_rental_story import rent

from compute.collateral.chain import KIND_FAILED_RENTAL, CollateralClient, SlashProposal
from compute.collateral.errors import ContractReverted
from compute.collateral.evidence import (
    FailedRentalEvidence,
    LeaseProbe,
    canonical_probes,
    evidence_hash,
    failed_rental_incident,
    lease_gpus,
    sign_evidence,
    sign_probe,
)
from compute.collateral.lease import ReportedLease, check_report
from compute.operator import EXIT_OK
from compute.operator.rentals import load_rental
from compute.store import PogResult

DEAD_S = 2.0  # the desks' dead run (start_desks)


def rented(story: Story) -> tuple[str, ReportedLease, object]:
    lease_id = rent(story)
    report = load_rental(story.root / "register" / "rentals", lease_id)
    code, body = story.register("report", lease_id, "--register.validators", story.validators[0].url)
    assert code == EXIT_OK, body
    return lease_id, check_report(report), report


def forged(story: Story, report, lease: ReportedLease, probes, served_by, order=canonical_probes) -> tuple:
    """The attacker's document and the proposal it opens."""
    evidence = FailedRentalEvidence(
        miner_hotkey=lease.miner_hotkey,
        gpus=lease_gpus(lease),
        lease_id=lease.lease_id,
        receipt=report.receipt,
        lease=report.lease,
        probes=order(probes),
    )
    proposal = SlashProposal(
        lease.miner_hotkey,
        KIND_FAILED_RENTAL,
        failed_rental_incident(lease),
        evidence_hash(evidence),
        lease_gpus(lease),
        lease.renter_evm,
    )
    return sign_evidence(served_by, evidence), proposal


def honest_outcomes(story: Story, digest: str) -> list[str | None]:
    return [v.parts.desk.book.outcome(digest) for v in story.validators]


@pytest.mark.slow
def test_dead_probes_dated_into_the_future_by_the_renter_and_a_dust_hotkey_slash_nobody(tmp_path) -> None:
    """The renter's own permitted hotkey and one more permitted hotkey (stake 1) sign "dead" probes
    of a live lease, dated into the future so they look long enough at once; they serve the
    evidence to every desk and open the proposal themselves. Refused everywhere: future probes,
    the renter's own probe, too little stake; and no honest validator ever saw the lease dead."""
    story = build_story(tmp_path, kill_after_s=3600)  # an honest miner: its leases stay up
    try:
        book, url = attacker_surface(story, "attacker")
        dust, dust_evm = permitted(story, "dust", 1.0)
        associate(story, story.renter, story.renter_evm)
        start_desks(story, extra_peers=(url,))
        _, lease, report = rented(story)
        now = time.time()
        probes = [
            sign_probe(w.hotkey, lease.lease_id, now, now + 3600, lease.endpoint, "connection refused")
            for w in (story.renter, dust)
        ]
        signed, proposal = forged(story, report, lease, probes, story.renter.hotkey)
        digest = book.add_evidence(signed)
        CollateralClient(story.contract().w3, story.evm.address, story.renter_evm).attest(proposal)
        CollateralClient(story.contract().w3, story.evm.address, dust_evm).attest(proposal)
        story.play(lambda: all(honest_outcomes(story, digest)), timeout_s=20, then_s=6 * DEAD_S)
        assert all(o and o.startswith("refused:") for o in honest_outcomes(story, digest)), honest_outcomes(
            story, digest
        )
        contract = story.contract()
        assert contract.owed(lease.renter_evm) == 0
        assert contract.deposit_of(story.miner.hotkey.ss58_address).amount == TAO
        assert contract.proposal(proposal).attesters == 2  # the renter and the dust hotkey, nobody else
        assert all(set(v.parts.desk.book.all_evidence()) == {digest} for v in story.validators)
    finally:
        story.close()


@pytest.mark.slow
def test_a_minority_signing_plausible_dead_probes_never_slashes_a_live_lease(tmp_path) -> None:
    """The best variant: the largest validator (44 %) colludes with the renter; it and three more
    permitted hotkeys sign probes that pass every check of the document (past-dated, long enough,
    none by a party to the rental, 44 % of the stake), serve them and open the proposal. The other
    validators hold the quorum between them, but their own probes saw the lease alive: they never
    attest, and the live lease's miner keeps its deposit."""
    story = build_story(tmp_path, kill_after_s=3600)
    try:
        colluder = story.validators[0]
        book, url = attacker_surface(story, "attacker")
        dust = [permitted(story, f"dust{i}", 1.0) for i in range(3)]
        start_desks(story, only=(1, 2), extra_peers=(url,))
        _, lease, report = rented(story)
        time.sleep(3 * DEAD_S)
        now = time.time()
        probes = [
            sign_probe(w.hotkey, lease.lease_id, lease.signed_at, now, lease.endpoint, "connection refused")
            for w in (colluder.wallet, *(d for d, _ in dust))
        ]
        signed, proposal = forged(story, report, lease, probes, colluder.wallet.hotkey)
        digest = book.add_evidence(signed)
        for account in (colluder.evm, *(a for _, a in dust)):
            CollateralClient(story.contract().w3, story.evm.address, account).attest(proposal)
        story.play(lambda: False, timeout_s=8 * DEAD_S)
        assert honest_outcomes(story, digest) == [None, None]  # checked, and waiting for an own observation
        assert all(v.parts.desk.prober.runs == {} for v in story.validators)  # they saw it alive throughout
        contract = story.contract()
        assert contract.owed(lease.renter_evm) == 0
        assert contract.deposit_of(story.miner.hotkey.ss58_address).amount == TAO
        attested, total = contract.tally(proposal)
        assert contract.proposal(proposal).attesters == 4 and attested * 2 < total  # the colluders only
    finally:
        story.close()


@pytest.mark.slow
def test_one_dead_lease_slashes_once_however_its_genuine_probes_are_re_served(tmp_path) -> None:
    """After the quorum's genuine slash, the renter (a permitted hotkey) re-serves the same genuine
    probes in other subsets and orders, as new documents, to every desk and to the contract; it also
    tries the incident sized otherwise. One incident, one slash: the deposit loses one day of rent,
    the escalation counter says 1, the renter is owed one day."""
    story = build_story(tmp_path, deposit_tao=7.0)
    try:
        book, url = attacker_surface(story, "attacker")
        associate(story, story.renter, story.renter_evm)
        start_desks(story, extra_peers=(url,))
        _, lease, report = rented(story)
        contract = story.contract()
        assert story.play(lambda: contract.owed(lease.renter_evm) > 0, timeout_s=90), "no genuine slash"
        (genuine,) = {
            d: s for v in story.validators for d, s in v.parts.desk.book.all_evidence().items()
        }.values()
        probes: list[LeaseProbe] = list(genuine.evidence.probes)
        signers = {p.validator for p in probes}
        for v in story.validators:  # every genuine probe signed for the lease, not only the evidence's
            own = v.parts.desk.book.probe(lease.lease_id)
            if own is not None and own.validator not in signers:
                probes.append(own)
                signers.add(own.validator)
        assert len(probes) >= 2
        attacker = CollateralClient(contract.w3, story.evm.address, story.renter_evm)
        documents = []
        for chosen, order in [(probes[:1], tuple), (probes[1:], tuple), (probes, lambda p: tuple(p[::-1]))]:
            signed, proposal = forged(story, report, lease, chosen, story.renter.hotkey, order)
            documents.append(book.add_evidence(signed))
            with pytest.raises(ContractReverted, match="ProposalClosed"):
                attacker.attest(proposal)  # the incident's proposal executed: closed for good
        first = forged(story, report, lease, probes, story.renter.hotkey)[1]
        resized = SlashProposal(
            first.hotkey, first.kind, first.incident, first.evidence_hash, 4, first.renter
        )
        with pytest.raises(ContractReverted, match="IncidentUsed"):
            attacker.attest(resized)  # the same incident sized as four GPUs
        story.play(lambda: False, timeout_s=6)
        deposit = contract.deposit_of(story.miner.hotkey.ss58_address)
        assert (deposit.amount, deposit.slashes) == (6 * TAO, 1)
        assert contract.owed(lease.renter_evm) == TAO
        reordered = documents[-1]  # every desk judges it (under CI's load that took longer than 6 s)
        story.play(lambda: None not in honest_outcomes(story, reordered), timeout_s=60)
        outcomes = honest_outcomes(story, reordered)
        assert all((o or "").startswith("refused: probes are not in canonical order") for o in outcomes), (
            outcomes
        )
        for digest in documents[:-1]:  # every desk judged the re-served subsets: closed, never slashed again
            assert all(
                o in (None, "closed on chain (ProposalClosed)") or o.startswith("refused")
                for o in honest_outcomes(story, digest)
            ), honest_outcomes(story, digest)
    finally:
        story.close()


@pytest.mark.slow
def test_a_miner_showing_each_validator_another_identity_is_slashed_like_one_that_does_not(tmp_path) -> None:
    """The killer shows each validator another GPU set (other UUIDs: another "machine" each) and
    deposits once per identity. There is one deposit, its hotkey's; its killed lease is one incident
    every validator observed and attests; the quorum slashes it, once."""
    story = build_story(tmp_path, deposit_tao=1.0)
    try:
        hotkey = story.miner.hotkey.ss58_address
        story.contract(story.miner_evm).deposit(TAO)  # "the second machine's deposit"
        story.contract(story.miner_evm).deposit(TAO)  # "the third's"
        results = [
            PogResult(
                1,
                story.miner_uid,
                hotkey,
                ok=True,
                sample=1.0,
                gpu_count=1,
                credited_gpus=1,
                gpu_uuids=(f"GPU-shown-to-validator-{i}",),
                created=time.time(),
            )
            for i in range(3)
        ]
        start_desks(story, results=results)
        _, lease, _ = rented(story)
        contract = story.contract()
        assert story.play(lambda: contract.owed(lease.renter_evm) > 0, timeout_s=90, then_s=3), "no slash"
        deposit = contract.deposit_of(hotkey)
        assert (deposit.amount, deposit.slashes) == (2 * TAO, 1)
        assert contract.owed(lease.renter_evm) == TAO
        books = [v.parts.desk.book for v in story.validators]
        outcomes = [o for b in books for d in b.all_evidence() if (o := b.outcome(d))]
        # the quorum's votes on one proposal: attested, or attested and then saw it executed
        assert sum("attested" in o or o == "slash executed" for o in outcomes) >= 2, outcomes
    finally:
        story.close()
