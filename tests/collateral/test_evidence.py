"""Evidence: canonical content, its hash on chain, signed by the validator serving it, checked by others."""

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
    canonical,
    check,
    evidence_hash,
    parse_signed,
    sign_evidence,
    sign_probe,
)
from compute.collateral.identity import machine_id
from compute.collateral.lease import ALLOCATE_PATH, SignedLease
from compute.protocol import AllocateRequest, LeaseInfo, LeaseResponse, Requirements, SignedRequest, SshAccess
from compute.transport import KeyWallet, sign_response

MINER = Keypair.create_from_uri("//ev-miner")
RENTER = Keypair.create_from_uri("//ev-renter")
VALIDATORS = [Keypair.create_from_uri(f"//ev-validator-{i}") for i in range(3)]
PERMITTED = frozenset(v.ss58_address for v in VALIDATORS)
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
        machine="0x" + machine_id(["GPU-1", "GPU-2"]).hex(),
        gpus=2,
        lease_id=LEASE,
        receipt=signed,
        lease=answer(signed, renter) if answer else lease_answer(signed, renter),
        probes=probes,
    )


def test_a_failed_rental_checked_by_another_validator_gives_the_same_proposal() -> None:
    evidence = failed_rental()
    served = sign_evidence(VALIDATORS[0], evidence).model_dump_json()
    fetched = parse_signed(served)  # another validator fetches it
    proposal = check(fetched, PERMITTED)
    assert proposal.kind == KIND_FAILED_RENTAL and proposal.renter == RENTER_EVM and proposal.gpus == 2
    assert proposal.evidence_hash == evidence_hash(evidence) == evidence_hash(fetched.evidence)
    assert proposal.machine == machine_id(["GPU-2", "GPU-1"])  # order of UUIDs does not matter
    assert json.loads(canonical(evidence)) == evidence.model_dump(mode="json")


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
        check(parse_signed(outsider.model_dump_json()), PERMITTED)


@pytest.mark.parametrize(
    "evidence, error",
    [
        (lambda: failed_rental(probers=VALIDATORS[:1]), "1 validators saw"),
        (lambda: failed_rental(probers=[VALIDATORS[0], Keypair.create_from_uri("//x")]), "1 validators saw"),
        (lambda: failed_rental(at_offset=2 * 86_400), "outside the signed term"),
        (lambda: failed_rental(at_offset=-600, dead_s=0), "outside the signed term"),
        (lambda: failed_rental(dead_s=DEAD_S / 2), "1 validators saw|0 validators saw"),
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
        "one-probe",
        "probe-by-outsider",
        "after-term",
        "before-term",
        "dead-too-briefly",
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
        check(parse_signed(signed.model_dump_json()), PERMITTED)


def test_a_tampered_probe_is_refused() -> None:
    evidence = failed_rental()
    probe = evidence.probes[1].model_copy(update={"reason": "edited"})
    tampered = evidence.model_copy(update={"probes": (evidence.probes[0], probe)})
    with pytest.raises(EvidenceError, match="probe signature"):
        check(sign_evidence(VALIDATORS[0], tampered), PERMITTED)


def test_a_cheat_names_no_renter() -> None:
    cheat = CheatEvidence(
        miner_hotkey=MINER.ss58_address,
        machine="0x" + "11" * 32,
        gpus=1,
        round_id="r1",
        challenge_id="c" * 32,
        reasons=("row 3 of GPU 0 does not match",),
        transcript_sha256="ab" * 32,
    )
    proposal = check(sign_evidence(VALIDATORS[1], cheat), PERMITTED)
    assert proposal.kind == KIND_CHEAT and int(proposal.renter, 16) == 0
