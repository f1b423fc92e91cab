"""Rental truth: rented credit only for leases the validator verifies itself.

A miner that refuses a validation lease for lack of capacity must show, for each rental it holds,
the renter's own btauth/1-signed allocate request (a receipt). The validator re-verifies that
signature (not its freshness: the request is old), requires the renter to be a known party (a
validator-permitted hotkey or an operator key the validator trusts) on another coldkey than the
miner's (``Renters``: a hotkey under the miner's own coldkey renting its GPU is the miner renting to
itself, whatever permit it holds), that the request is not one of this validator's own canaries,
that the signed term has not ended, and that the lease's SSH endpoint answers with the lease's
pinned host key. Only the GPUs of leases that pass all of this count as rented, and only for the
round in which the validator saw them alive.

What it deliberately does not do: score (the round turns the verified fraction into a sample), or
learn whether a renter still uses a lease it has released early, or tell a colluding renter on
another coldkey from a real one (see docs/threat-model.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bittensor import http_auth
from pydantic import ValidationError

from compute.protocol import ROUTES, AllocateRequest, RentalReceipt, RentalReceiptsRequest
from compute.transport import KeptRequestError, MinerClient, TransportError, verify_kept_request
from compute.validator.session.sshprobe import host_key_answers

log = logging.getLogger(__name__)

ALLOCATE_PATH = ROUTES[AllocateRequest][0]
START_SLACK_S = 300.0  # a lease starts after its request is signed; tolerated clock difference
PROBE_CONCURRENCY = 8
# Shorter signed terms never count: a lease that short is no rental worth a bonus (and a kept
# short lease must not excuse refusing the validation lease that follows).
MIN_CREDITED_LEASE_S = 900


class ReceiptRejected(Exception):
    """A receipt that does not prove a rental; the message says why."""


@dataclass(frozen=True)
class Renters:
    """Who counts as a renter this round and what the validator knows of them.

    ``trusted``: validator-permitted hotkeys plus the operators of ``--validator.trusted_renters``;
    ``coldkeys``: every registered hotkey's coldkey (the metagraph), so a renter on the miner's own
    coldkey is seen for what it is; ``own_canaries``: the SSH public keys of this validator's own
    canary rentals still in their signed term (a canary the miner kept is never a rental).
    """

    trusted: frozenset[str] = frozenset()
    coldkeys: Mapping[str, str] = field(default_factory=dict)
    own_canaries: frozenset[str] = frozenset()

    def same_owner(self, renter: str, miner_hotkey: str) -> bool:
        """Is ``renter`` the miner itself: its hotkey, or a hotkey under the miner's coldkey?"""
        if renter == miner_hotkey:
            return True
        miner_coldkey = self.coldkeys.get(miner_hotkey)
        return miner_coldkey is not None and self.coldkeys.get(renter) == miner_coldkey


@dataclass(frozen=True)
class VerifiedLease:
    """A rental whose renter signed its request and whose endpoint answered with its host key."""

    lease_id: str
    renter: str
    gpu_count: int
    signature: str  # identifies the signed request (one request credits one lease)
    signed_at: float
    ends_at: float
    host: str
    port: int
    host_key: str


@dataclass(frozen=True)
class RentalCheck:
    """What the validator verified of a miner's rentals this round."""

    alive: tuple[VerifiedLease, ...] = ()
    dead: tuple[VerifiedLease, ...] = ()  # signed and in term, but the endpoint did not answer
    rejected: tuple[str, ...] = ()

    @property
    def rented_gpus(self) -> int:
        return sum(lease.gpu_count for lease in self.alive)

    def fraction(self, claimed_gpus: int) -> float:
        """Verified rented GPUs over claimed GPUs, in [0, 1]."""
        if claimed_gpus <= 0:
            return 0.0
        return min(1.0, self.rented_gpus / claimed_gpus)


def verify_receipt(receipt: RentalReceipt, miner_hotkey: str, renters: Renters, now: float) -> VerifiedLease:
    """The lease a receipt proves (before the liveness probe); raises :class:`ReceiptRejected`."""
    signed = receipt.request
    if signed.path != ALLOCATE_PATH:
        raise ReceiptRejected(f"lease={receipt.lease_id}: receipt is for {signed.path!r}, not an allocation")
    try:
        renter, nonce = verify_kept_request(signed.headers, signed.body, signed.path, miner_hotkey)
    except KeptRequestError as exc:
        raise ReceiptRejected(f"lease={receipt.lease_id}: receipt {exc}") from None
    if renter == miner_hotkey:
        raise ReceiptRejected(f"lease={receipt.lease_id}: the miner rented to itself")
    if renters.same_owner(renter, miner_hotkey):
        raise ReceiptRejected(
            f"lease={receipt.lease_id}: renter {renter} is on the miner's own coldkey (a self-rental)"
        )
    if renter not in renters.trusted:
        raise ReceiptRejected(f"lease={receipt.lease_id}: renter {renter} is not a known party")
    try:
        request = AllocateRequest.model_validate_json(signed.body)
    except ValidationError:
        raise ReceiptRejected(f"lease={receipt.lease_id}: signed body is not an allocate request") from None
    if " ".join(request.ssh_public_key.split()[:2]) in renters.own_canaries:
        raise ReceiptRejected(
            f"lease={receipt.lease_id}: this validator's own canary, released, never a rental"
        )
    if request.purpose != "rental" or request.requirements.gpu_count < 1:
        raise ReceiptRejected(f"lease={receipt.lease_id}: not a GPU rental")
    if request.duration_s < MIN_CREDITED_LEASE_S:
        raise ReceiptRejected(
            f"lease={receipt.lease_id}: a {request.duration_s}s lease is canary-sized, not a rental"
        )
    signed_at = nonce / 1e9
    ends_at = min(receipt.expires_at, signed_at + request.duration_s + START_SLACK_S)
    if signed_at > now + START_SLACK_S or ends_at <= now:
        raise ReceiptRejected(f"lease={receipt.lease_id}: outside its signed term")
    if receipt.ssh is None:
        raise ReceiptRejected(f"lease={receipt.lease_id}: no SSH access to check")
    gpus = min(request.requirements.gpu_count, len(receipt.gpus) or request.requirements.gpu_count)
    return VerifiedLease(
        lease_id=receipt.lease_id,
        renter=renter,
        gpu_count=gpus,
        signature={k.lower(): v for k, v in signed.headers.items()}.get(
            http_auth.HEADER_SIGNATURE.lower(), ""
        ),
        signed_at=signed_at,
        ends_at=ends_at,
        host=receipt.ssh.host,
        port=receipt.ssh.port,
        host_key=receipt.ssh.host_key,
    )


def _screen(
    receipts: Iterable[RentalReceipt], miner_hotkey: str, renters: Renters, now: float
) -> tuple[list[VerifiedLease], list[str]]:
    signed: list[VerifiedLease] = []
    rejected: list[str] = []
    seen: set[str] = set()
    for receipt in receipts:
        try:
            lease = verify_receipt(receipt, miner_hotkey, renters, now)
        except ReceiptRejected as exc:
            rejected.append(str(exc))
            continue
        if lease.signature in seen:
            rejected.append(f"lease={lease.lease_id}: the same signed request shown twice")
            continue
        seen.add(lease.signature)
        signed.append(lease)
    return signed, rejected


async def check_rentals(
    client: MinerClient,
    endpoint: str,
    miner_hotkey: str,
    renters: Renters,
    now: float,
    timeout: float = 15.0,
) -> RentalCheck:
    """Fetch the miner's receipts, verify each, probe the endpoints of those that verify."""
    try:
        response = await client.call(endpoint, miner_hotkey, RentalReceiptsRequest(), timeout=timeout)
    except TransportError as exc:
        return RentalCheck(rejected=(f"receipts: {exc}",))
    signed, rejected = _screen(response.receipts, miner_hotkey, renters, now)
    gate = asyncio.Semaphore(PROBE_CONCURRENCY)

    async def probe(lease: VerifiedLease) -> str | None:
        async with gate:
            return await host_key_answers(lease.host, lease.port, lease.host_key, timeout)

    problems = await asyncio.gather(*(probe(lease) for lease in signed))
    paired = list(zip(signed, problems, strict=True))
    alive = tuple(lease for lease, problem in paired if problem is None)
    dead = tuple(lease for lease, problem in paired if problem is not None)
    rejected += [f"lease={lease.lease_id}: {problem}" for lease, problem in paired if problem is not None]
    return RentalCheck(alive, dead, tuple(rejected))


__all__ = [
    "ALLOCATE_PATH",
    "ReceiptRejected",
    "RentalCheck",
    "Renters",
    "VerifiedLease",
    "check_rentals",
    "verify_receipt",
]
