"""Each rental as both parties signed it, kept by the renter: the grounds for compensation.

When the renter names an EVM address (``--register.renter_evm``), the allocate request carries it,
signed; the request exactly as sent (path, body, btauth/1 headers) and the miner's signed answer
(the lease, its SSH endpoint and host key) are written to ``<data_dir>/rentals/<lease_id>.json``
as a :class:`compute.collateral.lease.LeaseReport` (0600: it names where the lease is). If the
miner kills the lease inside its term, ``register.py report`` sends exactly this file to
validators. Nothing secret is in it; nothing in it can be forged by either side alone.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import ValidationError

from compute.collateral.lease import LeaseReport, SignedLease
from compute.operator.errors import LeaseNotFound
from compute.protocol import LeaseResponse, SignedRequest
from compute.transport import SignedExchange

logger = logging.getLogger(__name__)


def report_of(miner_hotkey: str, exchange: SignedExchange) -> LeaseReport:
    return LeaseReport(
        miner_hotkey=miner_hotkey,
        receipt=SignedRequest(
            path=exchange.path, body=exchange.body.decode(), headers=dict(exchange.headers)
        ),
        lease=SignedLease(body=exchange.response.decode(), signature=exchange.signature.lower()),
    )


def save_rental(directory: Path, miner_hotkey: str, exchange: SignedExchange) -> Path:
    """Keep the rental (atomically, 0600); its path."""
    report = report_of(miner_hotkey, exchange)
    lease_id = LeaseResponse.model_validate_json(report.lease.body).lease.lease_id
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{lease_id}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(report.model_dump_json(indent=1))
    os.replace(tmp, path)
    logger.info("rental lease=%s kept with its signatures at %s", lease_id, path)
    return path


def load_rental(directory: Path, lease_id: str) -> LeaseReport:
    path = directory / f"{lease_id}.json"
    try:
        return LeaseReport.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LeaseNotFound(
            f"no signed rental kept for lease {lease_id}: it was allocated without --register.renter_evm"
        ) from None
    except (OSError, ValidationError) as error:
        raise LeaseNotFound(f"the rental kept at {path} is unreadable: {error}") from None


__all__ = ["load_rental", "report_of", "save_rental"]
