"""Evidence: canonical content, its hash on chain, signed by the validator serving it, checked by
others; the incident it shows, whatever document shows it."""

from __future__ import annotations

import json
import time

import pytest
from bittensor import http_auth
from bittensor.sp_core import Keypair

from compute.collateral.chain import KIND_CHEAT, KIND_FAILED_RENTAL
from compute.collateral.errors import EvidenceError
from compute.collateral.evidence import (
    CheatEvidence,
    FailedRentalEvidence,
    Roster,
    canonical,
    canonical_probes,
    check,
    evidence_hash,
    incident_of,
    parse_signed,
    sign_evidence,
    sign_probe,
)
from compute.collateral.lease import ALLOCATE_PATH, SignedLease
from compute.protocol import AllocateRequest, LeaseInfo, LeaseResponse, Requirements, SignedRequest, SshAccess
from compute.transport import KeyWallet, sign_response

MINER = Keypair.create_from_uri("//ev-miner")
RENTER = Keypair.create_from_uri("//ev-renter")
VALIDATORS = sorted(
    (Keypair.create_from_uri(f"//ev-validator-{i}") for i in range(3)), key=lambda k: k.ss58_address
)
DUST = Keypair.create_from_uri("//ev-dust")  # a permitted hotkey with stake 1
RENTERS_OTHER = Keypair.create_from_uri("//ev-renters-other-hotkey")  # on the renter's coldkey
# 40 / 30 / 20 % of the stake, and the renter's own permitted hotkey holds the rest (10 %)
ROSTER = Roster(
    {
        **{v.ss58_address: stake for v, stake in zip(VALIDATORS, (400.0, 300.0, 200.0), strict=True)},
        RENTER.ss58_address: 99.0,
        DUST.ss58_address: 1.0,
        RENTERS_OTHER.ss58_address: 0.0001,
    },
    {
        **{v.ss58_address: v.ss58_address for v in VALIDATORS},
        RENTER.ss58_address: "renter-coldkey",
        RENTERS_OTHER.ss58_address: "renter-coldkey",
        DUST.ss58_address: "dust-coldkey",
        MINER.ss58_address: "miner-coldkey",
    },
)
RENTER_EVM = "0x" + "ab" * 20
LEASE = "0" * 31 + "1"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl renter"
ENDPOINT = "10.0.0.1:40001"
DEAD_S = 600.0


def lease_answer(
    signed: SignedRequest, renter: str, miner: Keypair = MINER, lease_id: str = LEASE
) -> SignedLease:
    """The miner's signed answer to that request, as register.py records it."""
    nonce = int(signed.headers[http_auth.HEADER_NONCE])
    lease = LeaseInfo(
        lease_id=lease_id,
        owner_hotkey=renter,
        purpose="rental",
        state="active",
        requirements=Requirements(gpu_count=2),
        ssh=SshAccess(host="10.0.0.1", port=40001, username="root", host_key=" ".join(KEY.split()[:2])),
        created_at=nonce / 1e9,
        expires_at=nonce / 1e9 + 86_400,
    )
    body = LeaseResponse(lease=lease).model_dump_json()
    return SignedLease(body=body, signature=sign_response(miner, nonce, body.encode()))


def receipt(
    renter_evm: str | None = RENTER_EVM, signer: Keypair = RENTER, body_edit=None
) -> tuple[SignedRequest, float]:
    request = AllocateRequest(
        requirements=Requirements(gpu_count=2), duration_s=86_400, ssh_public_key=KEY, renter_evm=renter_evm
    )
    body = request.model_dump_json().encode()
    headers = http_auth.sign(
        KeyWallet(signer), method="POST", path=ALLOCATE_PATH, body=body, receiver_ss58=MINER.ss58_address
    )
    if body_edit:
        body = body_edit(body)
    return SignedRequest(path=ALLOCATE_PATH, body=body.decode(), headers=dict(headers)), time.time()


def failed_rental(
    probers=VALIDATORS[:2],
    at_offset: float = 60.0 + DEAD_S,
    dead_s: float = DEAD_S,
    endpoint: str = ENDPOINT,
    answer=None,
    gpus: int = 2,
    order=canonical_probes,
    **kw,
) -> FailedRentalEvidence:
    signed, start = receipt(**kw)
    at = start + at_offset
    probes = tuple(
        sign_probe(v, LEASE, max(start, at - dead_s), at, endpoint, "connection refused") for v in probers
    )
    renter = kw.get("signer", RENTER).ss58_address
    return FailedRentalEvidence(
        miner_hotkey=MINER.ss58_address,
        gpus=gpus,
        lease_id=LEASE,
        receipt=signed,
        lease=answer(signed, renter) if answer else lease_answer(signed, renter),
        probes=order(probes),
    )


def later() -> float:
    """A checker's clock once the default evidence's probes are over."""
    return time.time() + 60.0 + DEAD_S


def test_a_failed_rental_checked_by_another_validator_gives_the_same_proposal() -> None:
    evidence = failed_rental()
    served = sign_evidence(VALIDATORS[0], evidence).model_dump_json()
    fetched = parse_signed(served)  # another validator fetches it
    proposal = check(fetched, ROSTER, later())
    assert proposal.kind == KIND_FAILED_RENTAL and proposal.renter == RENTER_EVM and proposal.gpus == 2
    assert proposal.evidence_hash == evidence_hash(evidence) == evidence_hash(fetched.evidence)
    assert proposal.incident == incident_of(evidence)
    assert json.loads(canonical(evidence)) == evidence.model_dump(mode="json")


def test_reordered_or_partial_documents_of_one_failed_lease_are_one_incident() -> None:
    """The attacker re-serves the same genuine probes in another order or as a subset: the order is
    refused (one canonical encoding), a subset is another document of the same incident: the same
    proposal on chain, which slashes once."""
    signed, start = receipt()
    at = start + 60.0 + DEAD_S
    probes = [sign_probe(v, LEASE, at - DEAD_S, at, ENDPOINT, "refused") for v in VALIDATORS]
    answer = lease_answer(signed, RENTER.ss58_address)

    def document(chosen) -> FailedRentalEvidence:
        return FailedRentalEvidence(
            miner_hotkey=MINER.ss58_address,
            gpus=2,
            lease_id=LEASE,
            receipt=signed,
            lease=answer,
            probes=chosen,
        )

    whole = check(sign_evidence(VALIDATORS[0], document(canonical_probes(probes))), ROSTER, later())
    reordered = document(tuple(reversed(canonical_probes(probes))))
    with pytest.raises(EvidenceError, match="canonical order"):
        check(sign_evidence(VALIDATORS[0], reordered), ROSTER, later())
    twice = document((probes[0], probes[0]))
    with pytest.raises(EvidenceError, match="canonical order"):
        check(sign_evidence(VALIDATORS[0], twice), ROSTER, later())
    subsets = [canonical_probes(probes[:2]), canonical_probes(probes[1:]), canonical_probes(probes[::2])]
    proposals = [check(sign_evidence(VALIDATORS[1], document(c)), ROSTER, later()) for c in subsets]
    assert len({p.evidence_hash for p in [whole, *proposals]}) == 4  # four documents ...
    assert {p.proposal_id() for p in [whole, *proposals]} == {whole.proposal_id()}  # ... one proposal


def test_evidence_with_a_forged_serving_signature_or_content_is_refused() -> None:
    signed = sign_evidence(VALIDATORS[0], failed_rental())
    raw = json.loads(signed.model_dump_json())
    raw["evidence"]["gpus"] = 8  # a bigger slash after signing
    with pytest.raises(EvidenceError, match="signature"):
        parse_signed(json.dumps(raw))
    with pytest.raises(EvidenceError, match="malformed"):
        parse_signed(b'{"evidence": 1}')
    outsider = sign_evidence(Keypair.create_from_uri("//not-a-validator"), failed_rental())
    with pytest.raises(EvidenceError, match="not a validator"):
        check(parse_signed(outsider.model_dump_json()), ROSTER, later())


@pytest.mark.parametrize(
    "evidence, error",
    [
        (lambda: failed_rental(probers=VALIDATORS[2:]), "holding 20% of the stake"),
        (lambda: failed_rental(probers=[VALIDATORS[2], Keypair.create_from_uri("//x")]), "holding 20%"),
        (lambda: failed_rental(probers=[DUST, VALIDATORS[2]]), "holding 20%"),  # two hotkeys, little stake
        (lambda: failed_rental(probers=[RENTER, VALIDATORS[0]]), "a party to the rental"),
        (lambda: failed_rental(probers=[RENTERS_OTHER, VALIDATORS[0]]), "a party to the rental"),
        (lambda: failed_rental(probers=[MINER, VALIDATORS[0]]), "a party to the rental"),
        (lambda: failed_rental(at_offset=3 * DEAD_S), "in this validator's future"),
        (lambda: failed_rental(at_offset=2 * 86_400), "outside the signed term"),
        (lambda: failed_rental(at_offset=-600, dead_s=0), "outside the signed term"),
        (lambda: failed_rental(dead_s=DEAD_S / 2), "holding 0% of the stake"),
        (lambda: failed_rental(gpus=8), "names 8 GPUs"),
        (lambda: failed_rental(order=lambda p: tuple(reversed(canonical_probes(p)))), "canonical order"),
        (lambda: failed_rental(endpoint="10.0.0.9:22"), "another lease or endpoint"),
        (
            lambda: failed_rental(answer=lambda s, r: lease_answer(s, r, miner=RENTER)),
            "not the miner's signed answer",
        ),
        (lambda: failed_rental(answer=lambda s, r: lease_answer(s, r, lease_id="f" * 32)), "another lease"),
        (lambda: failed_rental(renter_evm=None), "no EVM address"),
        (lambda: failed_rental(signer=MINER), "rented to itself"),
        (lambda: failed_rental(body_edit=lambda b: b.replace(b"ab" * 20, b"cd" * 20)), "does not verify"),
    ],
    ids=[
        "one-small-prober",
        "probe-by-outsider",
        "two-hotkeys-little-stake",
        "renter-probes",
        "renters-coldkey-probes",
        "miner-probes",
        "probe-from-the-future",
        "after-term",
        "before-term",
        "dead-too-briefly",
        "more-gpus-than-rented",
        "reordered-probes",
        "endpoint-the-miner-never-named",
        "answer-not-signed-by-the-miner",
        "answer-for-another-lease",
        "no-renter-evm",
        "self-rental",
        "renter-swapped",
    ],
)
def test_evidence_that_does_not_prove_a_failed_rental_is_refused(evidence, error: str) -> None:
    signed = sign_evidence(VALIDATORS[0], evidence())
    with pytest.raises(EvidenceError, match=error):
        check(parse_signed(signed.model_dump_json()), ROSTER, later())


def test_a_tampered_probe_is_refused() -> None:
    evidence = failed_rental()
    probe = evidence.probes[1].model_copy(update={"reason": "edited"})
    tampered = evidence.model_copy(update={"probes": (evidence.probes[0], probe)})
    with pytest.raises(EvidenceError, match="probe signature"):
        check(sign_evidence(VALIDATORS[0], tampered), ROSTER, later())


def cheat(proven_at: float, round_id: str = "r1") -> CheatEvidence:
    return CheatEvidence(
        miner_hotkey=MINER.ss58_address,
        gpus=1,
        round_id=round_id,
        challenge_id="c" * 32,
        reasons=("row 3 of GPU 0 does not match",),
        transcript_sha256="ab" * 32,
        proven_at=proven_at,
    )


def test_a_cheat_names_no_renter_and_its_incident_is_the_miner_and_the_window() -> None:
    day = 86_400 * 20_000
    proposal = check(sign_evidence(VALIDATORS[1], cheat(day + 10)), ROSTER, day + 100)
    assert proposal.kind == KIND_CHEAT and int(proposal.renter, 16) == 0
    other_round = check(sign_evidence(VALIDATORS[2], cheat(day + 50, "r2")), ROSTER, day + 100)
    assert other_round.proposal_id() == proposal.proposal_id()  # the same window: one incident
    next_day = check(sign_evidence(VALIDATORS[2], cheat(day + 86_400)), ROSTER, day + 86_400)
    assert next_day.incident != proposal.incident
    with pytest.raises(EvidenceError, match="future"):
        check(sign_evidence(VALIDATORS[1], cheat(day + 3600)), ROSTER, day + 100)
