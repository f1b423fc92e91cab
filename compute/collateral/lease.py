"""A rental as its two parties signed it: the renter's allocate request and the miner's answer.

A renter that wants to be made whole shows a :class:`LeaseReport`: its own btauth/1-signed
allocate request (the receipt: miner hotkey, term, ``renter_evm``) and the miner's
``compute-resp/1``-signed answer to that very request (bound by the request's nonce: the lease id,
its SSH endpoint and pinned host key). Neither party can forge the other's half, so a validator can
probe the endpoint the *miner* named, for the term the *renter* signed, and pay the address the
renter signed. :func:`check_report` turns a report into a :class:`ReportedLease`, or refuses it.

A renter that released its lease itself cannot call it failed: the miner keeps the renter's signed
deallocate request and shows it (``LeaseEndRequest``); :func:`released_at` checks it.

What it deliberately does not do: probe anything (the validator does) or decide a slash
(``compute.collateral.evidence``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compute.collateral.errors import EvidenceError
from compute.protocol import (
    ROUTES,
    AllocateRequest,
    DeallocateRequest,
    Hotkey,
    LeaseResponse,
    SignedRequest,
)
from compute.transport import KeptRequestError, verify_kept_request, verify_response

ALLOCATE_PATH = ROUTES[AllocateRequest][0]
DEALLOCATE_PATH = ROUTES[DeallocateRequest][0]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SignedLease(_Model):
    """The miner's signed answer (a ``LeaseResponse``) to the renter's allocate request."""

    body: str = Field(max_length=16384, description="the response body exactly as the miner sent it")
    signature: str = Field(pattern=r"^0x[0-9a-f]{128}$", description="compute-resp/1 by the miner hotkey")


class LeaseReport(_Model):
    """renter -> validator: this lease of mine died inside its term; here is what both sides signed."""

    kind: Literal["lease_report"] = "lease_report"
    miner_hotkey: Hotkey
    receipt: SignedRequest
    lease: SignedLease


@dataclass(frozen=True)
class ReportedLease:
    """A rental both parties signed: who, where, until when, and whom a slash would pay."""

    lease_id: str
    miner_hotkey: str
    renter: str  # the renter's hotkey (it signed the request)
    renter_evm: str  # lowercase 0x address the renter signed
    nonce: int  # the renter's signed request nonce (ns): with the lease, names the incident
    signed_at: float  # the request's nonce time (renter's clock)
    term_end: float  # signed_at + the signed duration
    host: str
    port: int
    host_key: str
    gpus: int  # GPUs the renter asked for (0: a CPU lease)

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


def _signed_by(signed: SignedRequest, receiver: str, path: str) -> tuple[str, int]:
    """(signer hotkey, nonce) of a btauth/1 request addressed to ``receiver``; EvidenceError otherwise."""
    if signed.path != path:
        raise EvidenceError(f"signed request is for {signed.path!r}, not {path!r}")
    try:
        return verify_kept_request(signed.headers, signed.body, signed.path, receiver)
    except KeptRequestError as error:
        raise EvidenceError(f"signed request: {error}") from None


def renter_of(receipt: SignedRequest, miner_hotkey: str) -> tuple[str, AllocateRequest, int]:
    """(renter hotkey, its allocate request, nonce in ns) from a receipt; EvidenceError otherwise."""
    renter, nonce = _signed_by(receipt, miner_hotkey, ALLOCATE_PATH)
    try:
        request = AllocateRequest.model_validate_json(receipt.body)
    except ValidationError:
        raise EvidenceError("receipt body is not an allocate request") from None
    return renter, request, nonce


def check_report(report: LeaseReport) -> ReportedLease:
    """The rental a report proves (both signatures, one request, a rental with a renter address)."""
    renter, request, nonce = renter_of(report.receipt, report.miner_hotkey)
    if renter == report.miner_hotkey:
        raise EvidenceError("the miner rented to itself")
    if request.purpose != "rental":
        raise EvidenceError("the receipt is not a rental")
    if request.renter_evm is None:
        raise EvidenceError("the renter signed no EVM address: nobody to compensate")
    if not verify_response(report.miner_hotkey, nonce, report.lease.body.encode(), report.lease.signature):
        raise EvidenceError("the lease answer is not the miner's signed answer to this request")
    try:
        lease = LeaseResponse.model_validate_json(report.lease.body).lease
    except ValidationError:
        raise EvidenceError("the miner's answer is not a lease") from None
    if lease.ssh is None or lease.owner_hotkey != renter or lease.purpose != "rental":
        raise EvidenceError("the miner's answer names no SSH endpoint of this renter's rental")
    return ReportedLease(
        lease_id=lease.lease_id,
        miner_hotkey=report.miner_hotkey,
        renter=renter,
        renter_evm=request.renter_evm.lower(),
        nonce=nonce,
        signed_at=nonce / 1e9,
        term_end=nonce / 1e9 + request.duration_s,
        host=lease.ssh.host,
        port=lease.ssh.port,
        host_key=" ".join(lease.ssh.host_key.split()[:2]),
        gpus=request.requirements.gpu_count,
    )


def released_at(release: SignedRequest | None, lease: ReportedLease) -> float | None:
    """When the renter itself released the lease (its signed deallocate request), or None.

    A release that does not verify as the renter's own request for this lease is no release."""
    if release is None:
        return None
    try:
        signer, nonce = _signed_by(release, lease.miner_hotkey, DEALLOCATE_PATH)
        request = DeallocateRequest.model_validate_json(release.body)
    except (EvidenceError, ValidationError):
        return None
    if signer != lease.renter or request.lease_id != lease.lease_id:
        return None
    return nonce / 1e9


__all__ = [
    "ALLOCATE_PATH",
    "DEALLOCATE_PATH",
    "LeaseReport",
    "ReportedLease",
    "SignedLease",
    "check_report",
    "released_at",
    "renter_of",
]
