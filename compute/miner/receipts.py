"""Rental receipts: the renters' own signed allocate requests, shown to validators on request.

A validator credits a miner as rented only for leases it can verify itself: the receipt carries
the renter's btauth/1-signed request bytes, which the miner cannot forge, plus the lease's SSH
endpoint and pinned host key, which the validator probes. This module only reads the lease store;
verifying receipts is the validator's job (``compute.validator.rentals.receipts``).
"""

from __future__ import annotations

import asyncio
import logging

from compute.allocation import AllocationManager, Receipt
from compute.protocol import RentalReceipt, SignedRequest
from compute.transport import current_signed

logger = logging.getLogger(__name__)
MAX_RECEIPTS = 64


def signed_receipt() -> Receipt | None:
    """The request being served, as signed (None when the transport runs without authentication)."""
    raw = current_signed.get()
    if raw is None:
        return None
    try:
        body = raw.body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return Receipt(raw.path, body, dict(raw.headers))


def _rental_receipts(manager: AllocationManager) -> list[RentalReceipt]:
    out: list[RentalReceipt] = []
    for lease in manager.store.active():
        if lease.record.purpose != "rental" or len(out) >= MAX_RECEIPTS:
            continue
        receipt = manager.store.receipt(lease.lease_id)
        if receipt is None:
            continue
        info = manager.info(lease)
        out.append(
            RentalReceipt(
                lease_id=lease.lease_id,
                request=SignedRequest(path=receipt.path, body=receipt.body, headers=receipt.headers),
                gpus=info.gpus,
                ssh=info.ssh,
                created_at=info.created_at,
                expires_at=info.expires_at,
            )
        )
    return out


async def rental_receipts(manager: AllocationManager) -> list[RentalReceipt]:
    """Receipts of every active rental that has one (at most ``MAX_RECEIPTS``)."""
    return await asyncio.to_thread(_rental_receipts, manager)


async def keep_release(manager: AllocationManager, lease_id: str) -> None:
    """Keep the owner's signed deallocate request being served: proof that the renter ended the
    lease itself, shown to validators asked to slash the miner for it (docs/collateral.md)."""
    receipt = signed_receipt()
    if receipt is not None:
        await asyncio.to_thread(manager.store.set_release, lease_id, receipt)


async def lease_release(manager: AllocationManager, lease_id: str) -> SignedRequest | None:
    """The renter's signed release of ``lease_id``, if it released it itself."""
    receipt = await asyncio.to_thread(manager.store.release, lease_id)
    if receipt is None:
        return None
    return SignedRequest(path=receipt.path, body=receipt.body, headers=receipt.headers)


__all__ = ["MAX_RECEIPTS", "keep_release", "lease_release", "rental_receipts", "signed_receipt"]
