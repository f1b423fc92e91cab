"""Evidence validators can agree on: its content is canonical JSON, its keccak hash goes on chain.

Two kinds, both naming the miner hotkey, the machine and its proven GPU count:

- ``failed_rental``: a lease dead inside its signed term. It carries the rental as both parties
  signed it (``compute.collateral.lease``: the renter's btauth/1-signed allocate request, which
  binds the miner hotkey, the term and the renter's EVM address, and the miner's signed answer,
  which names the lease's SSH endpoint) and the probes of at least ``MIN_PROBES`` distinct
  validators, each signed by its validator's hotkey, that found that endpoint dead for at least
  ``min_dead_s`` seconds inside that term.
- ``cheat``: a round whose proof failed by mathematics (a wrong opened row, a root of another
  challenge): the challenge, the verdict's reasons and the transcript digest, signed by the
  validator that ran it.

One validator assembles the evidence and serves it signed (:class:`SignedEvidence`); every other
validator fetches it, runs :func:`check` (signatures, both halves of the rental, probes, term) and
attests the same hash. What it deliberately does not do: probe leases or run rounds (the validator
does), or talk to the contract (``compute.collateral.chain``).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from bittensor.sp_core import Keypair, verify
from eth_utils import keccak
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compute.collateral.chain import KIND_CHEAT, KIND_FAILED_RENTAL, ZERO_ADDRESS, SlashProposal
from compute.collateral.errors import EvidenceError
from compute.collateral.lease import LeaseReport, ReportedLease, SignedLease, check_report
from compute.protocol import EvmAddress, Hotkey, LeaseId, SignedRequest

EVIDENCE_DOMAIN = b"compute-evidence/1|"
PROBE_DOMAIN = b"compute-probe/1|"
MIN_PROBES = 2
MIN_DEAD_S = 600.0  # how long a probe must have found the endpoint dead (the miner's recovery time)
Hex32 = Annotated[str, Field(pattern=r"^0x[0-9a-f]{64}$")]
SigHex = Annotated[str, Field(pattern=r"^0x[0-9a-f]{128}$")]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LeaseProbe(_Model):
    """One validator found the lease's SSH endpoint dead from ``since`` to ``at`` on every try
    (its own clock), signed by that validator's hotkey."""

    validator: Hotkey
    lease_id: LeaseId
    since: float = Field(ge=0)
    at: float = Field(ge=0)
    endpoint: str = Field(max_length=64)
    reason: str = Field(max_length=200)
    signature: SigHex

    def message(self) -> bytes:
        body = {k: v for k, v in self.model_dump(mode="json").items() if k != "signature"}
        return PROBE_DOMAIN + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


class FailedRentalEvidence(_Model):
    kind: Literal["failed_rental"] = "failed_rental"
    version: Literal[1] = 1
    miner_hotkey: Hotkey
    machine: Hex32
    gpus: int = Field(ge=1, le=64)
    lease_id: LeaseId
    receipt: SignedRequest  # the renter's own signed allocate request
    lease: SignedLease  # the miner's signed answer to it: the endpoint the probes tried
    probes: tuple[LeaseProbe, ...] = Field(min_length=1, max_length=64)

    def report(self) -> LeaseReport:
        return LeaseReport(miner_hotkey=self.miner_hotkey, receipt=self.receipt, lease=self.lease)


class CheatEvidence(_Model):
    kind: Literal["cheat"] = "cheat"
    version: Literal[1] = 1
    miner_hotkey: Hotkey
    machine: Hex32
    gpus: int = Field(ge=1, le=64)
    round_id: str = Field(max_length=64)
    challenge_id: str = Field(max_length=64)
    reasons: tuple[str, ...] = Field(min_length=1, max_length=16)
    transcript_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


Evidence = Annotated[FailedRentalEvidence | CheatEvidence, Field(discriminator="kind")]


class SignedEvidence(_Model):
    """Evidence as a validator serves it: the content, who serves it, its signature of the hash."""

    evidence: Evidence
    served_by: Hotkey
    signature: SigHex


def canonical(evidence: FailedRentalEvidence | CheatEvidence) -> bytes:
    """The bytes every validator hashes: sorted keys, no spaces, UTF-8."""
    return json.dumps(evidence.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()


def evidence_hash(evidence: FailedRentalEvidence | CheatEvidence) -> bytes:
    return keccak(canonical(evidence))


def _sign(keypair: Keypair, message: bytes) -> str:
    return "0x" + bytes(keypair.sign(message)).hex()


def sign_probe(
    keypair: Keypair, lease_id: str, since: float, at: float, endpoint: str, reason: str
) -> LeaseProbe:
    unsigned = LeaseProbe(
        validator=keypair.ss58_address,
        lease_id=lease_id,
        since=since,
        at=at,
        endpoint=endpoint,
        reason=reason,
        signature="0x" + "00" * 64,
    )
    return unsigned.model_copy(update={"signature": _sign(keypair, unsigned.message())})


def sign_evidence(keypair: Keypair, evidence: FailedRentalEvidence | CheatEvidence) -> SignedEvidence:
    signature = _sign(keypair, EVIDENCE_DOMAIN + evidence_hash(evidence))
    return SignedEvidence(evidence=evidence, served_by=keypair.ss58_address, signature=signature)


def _verifies(signer: str, message: bytes, signature: str) -> bool:
    try:
        return bool(verify(message, bytes.fromhex(signature[2:]), signer))
    except Exception:  # noqa: BLE001 - a malformed key or signature is simply not valid
        return False


def parse_signed(raw: bytes | str) -> SignedEvidence:
    """Evidence as fetched from a validator; EvidenceError if malformed or badly signed."""
    try:
        signed = SignedEvidence.model_validate_json(raw)
    except ValidationError as error:
        raise EvidenceError(f"malformed evidence: {error.errors()[0]['msg']}") from None
    digest = evidence_hash(signed.evidence)
    if not _verifies(signed.served_by, EVIDENCE_DOMAIN + digest, signed.signature):
        raise EvidenceError(f"evidence signature of {signed.served_by} does not verify")
    return signed


def check(
    signed: SignedEvidence,
    validators: frozenset[str],
    min_probes: int = MIN_PROBES,
    min_dead_s: float = MIN_DEAD_S,
) -> SlashProposal:
    """Everything a validator checks before attesting; the proposal to attest, or EvidenceError.

    ``validators`` are the hotkeys whose probes count (the subnet's validator-permitted hotkeys).
    """
    if signed.served_by not in validators:
        raise EvidenceError(f"evidence served by {signed.served_by}, not a validator")
    evidence = signed.evidence
    if isinstance(evidence, CheatEvidence):
        return proposal_for(evidence, ZERO_ADDRESS)
    lease = check_report(evidence.report())
    if lease.lease_id != evidence.lease_id:
        raise EvidenceError("the miner's answer is for another lease")
    counted = counted_probes(evidence.probes, lease, validators, min_dead_s)
    if len(counted) < min_probes:
        raise EvidenceError(f"{len(counted)} validators saw the lease dead; {min_probes} needed")
    return proposal_for(evidence, lease.renter_evm)


def counted_probes(
    probes: tuple[LeaseProbe, ...], lease: ReportedLease, validators: frozenset[str], min_dead_s: float
) -> set[str]:
    """The validators whose probes show ``lease`` dead long enough inside its term; EvidenceError
    for any probe that is not about this lease, outside the term, or not signed by its validator."""
    counted = set()
    for probe in probes:
        if probe.lease_id != lease.lease_id or probe.endpoint != lease.endpoint:
            raise EvidenceError(f"probe of {probe.validator} is for another lease or endpoint")
        if not (lease.signed_at <= probe.since <= probe.at <= lease.term_end):
            raise EvidenceError(f"probe of {probe.validator} at {probe.at:.0f} is outside the signed term")
        if not _verifies(probe.validator, probe.message(), probe.signature):
            raise EvidenceError(f"probe signature of {probe.validator} does not verify")
        if probe.validator in validators and probe.at - probe.since >= min_dead_s:
            counted.add(probe.validator)
    return counted


def proposal_for(evidence: FailedRentalEvidence | CheatEvidence, renter: EvmAddress | str) -> SlashProposal:
    kind = KIND_FAILED_RENTAL if isinstance(evidence, FailedRentalEvidence) else KIND_CHEAT
    return SlashProposal(
        hotkey=evidence.miner_hotkey,
        machine=bytes.fromhex(evidence.machine[2:]),
        kind=kind,
        evidence_hash=evidence_hash(evidence),
        gpus=evidence.gpus,
        renter=renter.lower(),
    )
