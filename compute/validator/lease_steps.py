"""The validation lease around one miner test: specs, allocate, SSH session, release.

Every step turns transport trouble into ``MinerUnreachable`` (before a lease exists: worth a retry)
or ``MinerFailed`` (final). A lease is always released (``released``), also on error and
cancellation; leases a killed run left behind are released before the next test.
"""

from __future__ import annotations

import asyncio
import logging

import asyncssh

from compute.protocol import (
    AllocateRequest,
    DeallocateRequest,
    ErrorCode,
    LeaseInfo,
    ListLeasesRequest,
    MachineSpecs,
    Requirements,
    SpecsRequest,
)
from compute.transport import MinerClient, PeerUnreachable, Rejected, RequestTimeout, TransportError
from compute.validator.failures import MinerFailed, MinerRented, MinerUnreachable
from compute.validator.params import MinerTarget, RoundParams
from compute.validator.pog_session import PogSession, PogSessionError

log = logging.getLogger(__name__)


async def fetch_specs(client: MinerClient, target: MinerTarget) -> MachineSpecs:
    try:
        return (await client.call(target.endpoint, target.hotkey, SpecsRequest())).specs
    except (RequestTimeout, PeerUnreachable) as exc:
        raise MinerUnreachable(f"specs: {exc}") from None
    except TransportError as exc:
        raise MinerFailed(f"specs: {exc}") from None


async def allocate(
    client: MinerClient,
    target: MinerTarget,
    params: RoundParams,
    key: asyncssh.SSHKey,
    gpu_count: int,
    host: str | None = None,
) -> LeaseInfo:
    """A validation lease with ``gpu_count`` GPUs and SSH access, or ``MinerRented`` for no capacity.

    ``host``: on that host of a multi-host miner (``compute.validator.hosts_step``)."""
    request = AllocateRequest(
        requirements=Requirements(
            gpu_count=gpu_count, cpu_count=1, memory_gb=params.lease_memory_gb, disk_gb=1.0, host=host
        ),
        duration_s=params.lease_seconds,
        ssh_public_key=" ".join(key.export_public_key("openssh").decode().split()[:2]),
        purpose="validation",
    )
    try:
        lease = (await client.call(target.endpoint, target.hotkey, request)).lease
    except Rejected as exc:
        if exc.code == ErrorCode.NO_CAPACITY and gpu_count > 0:
            raise MinerRented() from None
        raise MinerFailed(f"allocate refused: {exc}") from None
    except (RequestTimeout, PeerUnreachable) as exc:
        raise MinerUnreachable(f"allocate: {exc}") from None
    except TransportError as exc:
        raise MinerFailed(f"allocate: {exc}") from None
    if lease.ssh is None:
        await deallocate(client, target, lease.lease_id)
        raise MinerFailed("lease has no SSH access")
    if len(lease.gpus) < gpu_count:
        await deallocate(client, target, lease.lease_id)
        raise MinerFailed(f"lease has {len(lease.gpus)} GPUs, asked for {gpu_count}")
    return lease


class released:
    """Async context manager: deallocate the lease on the way out, whatever happened."""

    def __init__(self, client: MinerClient, target: MinerTarget, lease: LeaseInfo) -> None:
        self.args = (client, target, lease.lease_id)

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.shield(deallocate(*self.args))


async def deallocate(client: MinerClient, target: MinerTarget, lease_id: str) -> None:
    try:
        await asyncio.wait_for(
            client.call(target.endpoint, target.hotkey, DeallocateRequest(lease_id=lease_id)), 15
        )
    except (asyncio.TimeoutError, TransportError) as exc:
        log.warning("uid=%d lease=%s release failed (it expires on its own): %s", target.uid, lease_id, exc)


async def release_stale(client: MinerClient, target: MinerTarget) -> None:
    """Release this validator's validation leases a killed run left on the miner (best effort)."""
    try:
        listed = await asyncio.wait_for(client.call(target.endpoint, target.hotkey, ListLeasesRequest()), 15)
    except (asyncio.TimeoutError, TransportError) as exc:
        log.debug("uid=%d listing own leases failed: %s", target.uid, exc)
        return
    for lease in listed.leases:
        if lease.purpose == "validation" and lease.state == "active":
            log.info("uid=%d releasing stale validation lease=%s", target.uid, lease.lease_id)
            await deallocate(client, target, lease.lease_id)


async def open_session(lease: LeaseInfo, key: asyncssh.SSHKey, params: RoundParams) -> PogSession:
    ssh = lease.ssh
    if ssh is None:  # allocate already refused such a lease
        raise MinerFailed("lease has no SSH access")
    try:
        return await PogSession.open(
            ssh.host,
            ssh.port,
            ssh.username,
            key,
            ssh.host_key,
            timeout=min(60.0, params.miner_timeout),
            device=params.device,
        )
    except PogSessionError as exc:
        raise MinerFailed(str(exc)) from None


async def check_liveness(lease: LeaseInfo, key: asyncssh.SSHKey, params: RoundParams) -> None:
    """The lease's worker answers (proves the miner serves leases, not its GPUs)."""
    session = await open_session(lease, key, params)
    async with session:
        try:
            await session.info(params.miner_timeout)
        except PogSessionError as exc:
            raise MinerFailed(f"rented liveness check: {exc}") from None
