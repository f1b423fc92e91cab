"""Evidence validators can agree on: canonical JSON whose keccak hash goes on chain, of an
incident that slashes at most once.

Two kinds, both naming the miner hotkey (its deposit) and the GPUs the slash is sized by:

- ``failed_rental``: a lease dead inside its signed term. It carries the rental as both parties
  signed it (``compute.collateral.lease``: the renter's btauth/1-signed allocate request, which
  binds the miner hotkey, the term, the GPUs and the renter's EVM address, and the miner's signed
  answer, which names the lease's SSH endpoint) and probes, each signed by its validator's hotkey,
  that found that endpoint dead for at least ``min_dead_s`` seconds inside the term. The GPUs are
  the lease's, as both signed them. Probes count only from validator-permitted hotkeys that are
  neither the renter nor the miner nor on either one's coldkey, never from the future (beyond
  ``PROBE_SKEW_S`` of the checker's clock), and by stake: the probers must hold ``min_probe_share``
  of the validator stake. Probes are sorted by validator, one each, so a document cannot be
  re-served in another order under another hash.
- ``cheat``: a round whose proof failed by mathematics: the round, the verdict's reasons, the
  transcript digest and when it was proven. Its signatures prove only who served it: every
  attester must have proved the same cheat itself (``compute.validator.collateral.reproduce``).

The *incident* (``incident_of``) is what happened, whatever document shows it: a failed rental is
(miner, the renter's signed request nonce, lease); a cheat is (miner, the ``CHEAT_EPOCH_S`` window
it was proven in). The contract keys proposals and ``incidentUsed`` by it, so every evidence of one
incident counts toward one proposal and slashes at most once.

One validator assembles the evidence and serves it signed (:class:`SignedEvidence`); every other
validator fetches it, runs :func:`check` and, only with its own observation of the same incident
(``compute.validator.collateral.judging``), attests. What this module deliberately does not do:
probe leases or run rounds (the validator does), or talk to the contract
(``compute.collateral.chain``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Literal

from bittensor.sp_core import Keypair, verify
from eth_utils import keccak
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compute.chain import MetagraphSnapshot
from compute.collateral.chain import KIND_CHEAT, KIND_FAILED_RENTAL, ZERO_ADDRESS, SlashProposal
from compute.collateral.errors import EvidenceError
from compute.collateral.lease import LeaseReport, ReportedLease, SignedLease, check_report
from compute.collateral.windows import PROBE_SKEW_S
from compute.protocol import Hotkey, LeaseId, SignedRequest

EVIDENCE_DOMAIN = b"compute-evidence/1|"
PROBE_DOMAIN = b"compute-probe/1|"
INCIDENT_DOMAIN = b"compute-incident/1|"
MIN_PROBE_SHARE = 0.25  # probers holding this share of the validator stake make evidence (kappa / 2)
MIN_DEAD_S = 600.0  # how long a probe must have found the endpoint dead (the miner's recovery time)
CHEAT_EPOCH_S = 86_400  # a cheat incident: one miner, one such window (the day it was proven)
SigHex = Annotated[str, Field(pattern=r"^0x[0-9a-f]{128}$")]


@dataclass(frozen=True)
class Roster:
    """Who is who when evidence is checked: each validator-permitted hotkey's stake, and every
    neuron's coldkey (a probe by the renter, the miner or a hotkey on their coldkeys never counts)."""

    stakes: Mapping[str, float] = field(default_factory=dict)
    coldkeys: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, metagraph: MetagraphSnapshot) -> Roster:
        return cls(
            {n.hotkey: n.stake for n in metagraph.neurons if n.validator_permit and n.stake > 0},
            {n.hotkey: n.coldkey for n in metagraph.neurons},
        )

    @property
    def total(self) -> float:
        return sum(self.stakes.values())

    def share(self, hotkeys: Iterable[str]) -> float:
        """The share of the validator stake ``hotkeys`` hold (each once)."""
        total = self.total
        return sum(self.stakes.get(h, 0.0) for h in set(hotkeys)) / total if total > 0 else 0.0

    def party_to(self, hotkey: str, *parties: str) -> bool:
        """Whether ``hotkey`` is one of ``parties`` or shares a coldkey with one of them."""
        if hotkey in parties:
            return True
        coldkey = self.coldkeys.get(hotkey)
        return coldkey is not None and coldkey in {self.coldkeys.get(p) for p in parties}


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
    version: Literal[2] = 2
    miner_hotkey: Hotkey
    gpus: int = Field(ge=1, le=64)  # the lease's GPUs, as both parties signed them
    lease_id: LeaseId
    receipt: SignedRequest  # the renter's own signed allocate request
    lease: SignedLease  # the miner's signed answer to it: the endpoint the probes tried
    probes: tuple[LeaseProbe, ...] = Field(min_length=1, max_length=64)  # sorted by validator, one each

    def report(self) -> LeaseReport:
        return LeaseReport(miner_hotkey=self.miner_hotkey, receipt=self.receipt, lease=self.lease)


class CheatEvidence(_Model):
    kind: Literal["cheat"] = "cheat"
    version: Literal[2] = 2
    miner_hotkey: Hotkey
    gpus: int = Field(ge=1, le=64)  # the GPUs the assembler proved
    round_id: str = Field(max_length=64)
    challenge_id: str = Field(max_length=64)
    reasons: tuple[str, ...] = Field(min_length=1, max_length=16)
    transcript_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    proven_at: float = Field(ge=0)  # when the assembler's round proved it (its clock): the incident's window


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


def lease_gpus(lease: ReportedLease) -> int:
    """The GPUs a failed rental's slash is sized by: the lease's, as both parties signed them."""
    return max(1, lease.gpus)


def failed_rental_incident(lease: ReportedLease) -> bytes:
    """A failed rental: the miner, the renter's signed request (its nonce) and the lease."""
    parts = ("failed_rental", lease.miner_hotkey, str(lease.nonce), lease.lease_id)
    return keccak(INCIDENT_DOMAIN + "|".join(parts).encode())


def cheat_incident(miner_hotkey: str, proven_at: float) -> bytes:
    """A cheat: the miner and the ``CHEAT_EPOCH_S`` window it was proven in."""
    parts = ("cheat", miner_hotkey, str(int(proven_at // CHEAT_EPOCH_S)))
    return keccak(INCIDENT_DOMAIN + "|".join(parts).encode())


def incident_of(evidence: FailedRentalEvidence | CheatEvidence) -> bytes:
    if isinstance(evidence, CheatEvidence):
        return cheat_incident(evidence.miner_hotkey, evidence.proven_at)
    return failed_rental_incident(check_report(evidence.report()))


def check(
    signed: SignedEvidence,
    roster: Roster,
    now: float,
    min_probe_share: float = MIN_PROBE_SHARE,
    min_dead_s: float = MIN_DEAD_S,
) -> SlashProposal:
    """Everything a validator checks in a document before it looks for its own observation of the
    incident; the proposal to attest, or EvidenceError. ``now``: the checker's own clock."""
    if signed.served_by not in roster.stakes:
        raise EvidenceError(f"evidence served by {signed.served_by}, not a validator")
    evidence = signed.evidence
    if isinstance(evidence, CheatEvidence):
        if evidence.proven_at > now + PROBE_SKEW_S:
            raise EvidenceError("the cheat is dated in this validator's future")
        return proposal_for(evidence, ZERO_ADDRESS, cheat_incident(evidence.miner_hotkey, evidence.proven_at))
    lease = check_report(evidence.report())
    if lease.lease_id != evidence.lease_id:
        raise EvidenceError("the miner's answer is for another lease")
    if evidence.gpus != lease_gpus(lease):
        raise EvidenceError(
            f"names {evidence.gpus} GPUs; the rental both parties signed is for {lease_gpus(lease)}"
        )
    if [p.validator for p in evidence.probes] != sorted({p.validator for p in evidence.probes}):
        raise EvidenceError("probes are not in canonical order (sorted by validator, one each)")
    counted = counted_probes(evidence.probes, lease, roster, min_dead_s, now)
    share = roster.share(counted)
    if share < min_probe_share:
        raise EvidenceError(
            f"validators holding {share:.0%} of the stake saw the lease dead; {min_probe_share:.0%} needed"
        )
    return proposal_for(evidence, lease.renter_evm, failed_rental_incident(lease))


def counted_probes(
    probes: Iterable[LeaseProbe], lease: ReportedLease, roster: Roster, min_dead_s: float, now: float
) -> set[str]:
    """The validators whose probes show ``lease`` dead long enough inside its term; EvidenceError
    for any probe that is not about this lease, outside the term, from the future, by a party to the
    rental (renter, miner, their coldkeys) or not signed by its validator."""
    counted = set()
    for probe in probes:
        if probe.lease_id != lease.lease_id or probe.endpoint != lease.endpoint:
            raise EvidenceError(f"probe of {probe.validator} is for another lease or endpoint")
        if not (lease.signed_at <= probe.since <= probe.at <= lease.term_end):
            raise EvidenceError(f"probe of {probe.validator} at {probe.at:.0f} is outside the signed term")
        if probe.at > now + PROBE_SKEW_S:
            raise EvidenceError(
                f"probe of {probe.validator} ends at {probe.at:.0f}, in this validator's future"
            )
        if roster.party_to(probe.validator, lease.renter, lease.miner_hotkey):
            raise EvidenceError(
                f"probe of {probe.validator}: a party to the rental (renter or miner) cannot probe it"
            )
        if not _verifies(probe.validator, probe.message(), probe.signature):
            raise EvidenceError(f"probe signature of {probe.validator} does not verify")
        if probe.validator in roster.stakes and probe.at - probe.since >= min_dead_s:
            counted.add(probe.validator)
    return counted


def canonical_probes(probes: Iterable[LeaseProbe]) -> tuple[LeaseProbe, ...]:
    """One probe per validator (its latest), sorted by validator: the order every assembler uses."""
    latest: dict[str, LeaseProbe] = {}
    for probe in probes:
        if probe.validator not in latest or probe.at > latest[probe.validator].at:
            latest[probe.validator] = probe
    return tuple(latest[v] for v in sorted(latest))


def proposal_for(
    evidence: FailedRentalEvidence | CheatEvidence, renter: str, incident: bytes
) -> SlashProposal:
    kind = KIND_FAILED_RENTAL if isinstance(evidence, FailedRentalEvidence) else KIND_CHEAT
    return SlashProposal(
        hotkey=evidence.miner_hotkey,
        kind=kind,
        incident=incident,
        evidence_hash=evidence_hash(evidence),
        gpus=evidence.gpus,
        renter=renter.lower(),
    )
