"""Canary rentals: the validator rents a miner for a short lease as any renter would.

At random rounds (``--validator.canary_rate``) the validator asks for a ``rental`` lease of one GPU
(none on a CPU machine) for the shortest term, logs in over SSH with its own key and the pinned
host key, runs one command and checks its output, then releases the lease. A refused or broken
canary lowers the miner's availability (``RentalLedger.availability``); a refusal is excused only
when every claimed GPU is held by a verified rental.

What it deliberately does not do: prove GPUs (PoG does) or score (the ledger gives a factor).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass

import asyncssh

from compute.protocol import (
    MIN_LEASE_SECONDS,
    AllocateRequest,
    DeallocateRequest,
    ErrorCode,
    Requirements,
)
from compute.transport import MinerClient, Rejected, TransportError
from compute.validator.session.sshprobe import run_command

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CanaryOutcome:
    """One canary rental: worked end to end, or why not (``refused``: no capacity)."""

    ok: bool
    reason: str = ""
    refused: bool = False
    seconds: float = 0.0


def canary_request(key: asyncssh.SSHKey, gpu_count: int) -> AllocateRequest:
    public = " ".join(key.export_public_key("openssh").decode().split()[:2])
    return AllocateRequest(
        requirements=Requirements(gpu_count=min(1, gpu_count), cpu_count=1, memory_gb=1.0, disk_gb=1.0),
        duration_s=MIN_LEASE_SECONDS,
        ssh_public_key=public,
        purpose="rental",
    )


async def run_canary(
    client: MinerClient, endpoint: str, hotkey: str, gpu_count: int, timeout: float = 60.0
) -> CanaryOutcome:
    """Rent, SSH in, run ``echo <token>``, release; never raises."""
    started = time.monotonic()
    key = asyncssh.generate_private_key("ssh-ed25519")
    try:
        lease = (await client.call(endpoint, hotkey, canary_request(key, gpu_count), timeout=timeout)).lease
    except Rejected as exc:
        refused = exc.code == ErrorCode.NO_CAPACITY
        return CanaryOutcome(False, f"canary refused: {exc.code}", refused, time.monotonic() - started)
    except TransportError as exc:
        return CanaryOutcome(False, f"canary allocate failed: {exc}", False, time.monotonic() - started)
    try:
        if lease.ssh is None:
            return CanaryOutcome(False, "canary lease has no SSH access", False, time.monotonic() - started)
        token = secrets.token_hex(8)
        ssh = lease.ssh
        try:
            out = await run_command(
                ssh.host, ssh.port, ssh.username, key, ssh.host_key, f"echo canary-{token}", timeout
            )
        except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError) as exc:
            return CanaryOutcome(
                False, f"canary SSH failed: {exc or 'timeout'}", False, time.monotonic() - started
            )
        if f"canary-{token}" not in out:
            return CanaryOutcome(
                False, "canary command gave the wrong output", False, time.monotonic() - started
            )
        return CanaryOutcome(True, "", False, time.monotonic() - started)
    finally:
        try:
            await asyncio.shield(
                client.call(endpoint, hotkey, DeallocateRequest(lease_id=lease.lease_id), timeout=15)
            )
        except TransportError as exc:
            log.info("hotkey=%s canary lease=%s release failed: %s", hotkey[:8], lease.lease_id, exc)


__all__ = ["CanaryOutcome", "canary_request", "run_canary"]
