"""The validation lease around one miner test: specs, allocate, SSH session, release.

``leased`` is the one door to a lease for every path of a test (the machine, each host of a
multi-host miner, the rented GPUs beside their tenants): it makes the per-lease SSH key, allocates, notes the
endpoint and always releases, also on error and cancellation. Every step turns transport trouble
into ``MinerUnreachable`` (before a lease exists: worth a retry) or ``MinerFailed`` (final);
leases a killed run left behind are released before the next test.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

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
from compute.transport import PeerUnreachable, Rejected, RequestTimeout, TransportError
from compute.validator.check.context import MinerCheck
from compute.validator.failures import MinerFailed, MinerRented, MinerUnreachable
from compute.validator.params import RoundParams
from compute.validator.session.pog_session import ChannelBroken, PogSession, PogSessionError, SshFailed

log = logging.getLogger(__name__)

# A lost allocate answer (timeout) or a lease still starting (BUSY) is asked again with the same
# idempotency key: the miner answers with the lease the first attempt made, so a retry never finds
# the GPUs held by the validator's own orphan (which read as "rented") and never makes a second lease.
ALLOCATE_TRIES = 3
ALLOCATE_RETRY_S = (1.0, 2.0)
# Opening the SSH session (connect, start, upload the worker) is asked again on transport trouble:
# a broken pipe under the upload is a race of the channel, not an answer, and never the miner's zero.
# Only a session that cannot be opened on any try fails the test (nothing timed has started yet).
SESSION_TRIES = 3
SESSION_RETRY_S = (0.5, 1.5)


@dataclass(frozen=True)
class Lease:
    """A validation lease granted for this test and the per-lease key that opens it."""

    info: LeaseInfo
    key: asyncssh.SSHKey


async def fetch_specs(check: MinerCheck) -> MachineSpecs:
    """The miner's specs (first contact, bounded by the step bound alone); measures the round trip."""
    started = time.monotonic()
    try:
        specs = (await check.call(SpecsRequest(), timeout=check.params.lockstep.step_s)).specs
        check.rtt_s = time.monotonic() - started
        return specs
    except (RequestTimeout, PeerUnreachable) as exc:
        raise MinerUnreachable(f"specs: {exc}") from None
    except TransportError as exc:
        raise MinerFailed(f"specs: {exc}") from None


@asynccontextmanager
async def leased(
    check: MinerCheck, gpu_count: int, host: str | None = None, note: bool = True, beside: bool = False
) -> AsyncIterator[Lease]:
    """A validation lease with ``gpu_count`` GPUs (``MinerRented`` for no capacity), released on exit.

    ``host``: on that host of a multi-host miner (``compute.validator.check.hosts``); ``note``: add
    its SSH endpoint and host key to the test's notes (the device fingerprint); ``beside``: a lease
    beside the tenants of rented GPUs (``check.beside``), sharing them."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    info = await allocate(check, key, gpu_count, host, beside)
    if note and info.ssh is not None:
        check.notes.saw_lease(info.ssh.host, info.ssh.port, info.ssh.host_key)
    try:
        yield Lease(info, key)
    finally:
        await asyncio.shield(deallocate(check, info.lease_id))


async def allocate(
    check: MinerCheck, key: asyncssh.SSHKey, gpu_count: int, host: str | None = None, beside: bool = False
) -> LeaseInfo:
    """A validation lease with ``gpu_count`` GPUs and SSH access, or ``MinerRented`` for no capacity."""
    request = AllocateRequest(
        requirements=Requirements(
            gpu_count=gpu_count, cpu_count=1, memory_gb=check.params.lease_memory_gb, disk_gb=1.0, host=host
        ),
        # the test's own time plus the longest the lockstep window may keep it waiting at the gates
        duration_s=check.params.lease_seconds + int(check.params.lockstep.prepare_s),
        ssh_public_key=" ".join(key.export_public_key("openssh").decode().split()[:2]),
        purpose="beside" if beside else "validation",
        idempotency_key=secrets.token_urlsafe(18),  # one per test: retries get the same lease
    )
    bound = check.bound(check.params.lockstep.allocate_s)
    try:
        lease = await asyncio.wait_for(_allocate_once_or_replayed(check, request, gpu_count), bound)
    except asyncio.TimeoutError:  # a lease made after this expires on its own or is released as stale
        raise MinerFailed(f"allocate took more than {bound:.0f}s (lockstep bound): not ready") from None
    if lease.ssh is None:
        await deallocate(check, lease.lease_id)
        raise MinerFailed("lease has no SSH access")
    if len(lease.gpus) < gpu_count:
        await deallocate(check, lease.lease_id)
        raise MinerFailed(f"lease has {len(lease.gpus)} GPUs, asked for {gpu_count}")
    return lease


async def _allocate_once_or_replayed(
    check: MinerCheck, request: AllocateRequest, gpu_count: int
) -> LeaseInfo:
    """The lease for ``request``: asked up to ``ALLOCATE_TRIES`` times with its one idempotency key."""
    for attempt in range(ALLOCATE_TRIES):
        last = attempt == ALLOCATE_TRIES - 1
        try:
            return (await check.call(request)).lease
        except Rejected as exc:
            if exc.code == ErrorCode.BUSY and not last:
                log.info("uid=%d allocate: lease still starting, asking again", check.uid)
            elif exc.code == ErrorCode.NO_CAPACITY and gpu_count > 0:
                raise MinerRented() from None
            else:
                raise MinerFailed(f"allocate refused: {exc}") from None
        except RequestTimeout as exc:
            if last:
                raise MinerUnreachable(
                    f"allocate: {exc} ({ALLOCATE_TRIES} tries, one idempotency key)"
                ) from None
            log.info("uid=%d allocate timed out, asking again with the same key: %s", check.uid, exc)
        except PeerUnreachable as exc:
            raise MinerUnreachable(f"allocate: {exc}") from None
        except TransportError as exc:
            raise MinerFailed(f"allocate: {exc}") from None
        await asyncio.sleep(ALLOCATE_RETRY_S[attempt])
    raise AssertionError("unreachable")


async def deallocate(check: MinerCheck, lease_id: str) -> None:
    try:
        await asyncio.wait_for(check.call(DeallocateRequest(lease_id=lease_id)), 15)
    except (asyncio.TimeoutError, TransportError) as exc:
        log.warning("uid=%d lease=%s release failed (it expires on its own): %s", check.uid, lease_id, exc)


async def release_stale(check: MinerCheck) -> None:
    """Release this validator's validation leases a killed run left on the miner (best effort)."""
    try:
        listed = await asyncio.wait_for(
            check.call(ListLeasesRequest()), check.bound(check.params.lockstep.step_s)
        )
    except (asyncio.TimeoutError, TransportError) as exc:
        log.debug("uid=%d listing own leases failed: %s", check.uid, exc)
        return
    for lease in listed.leases:
        if lease.purpose in ("validation", "beside") and lease.state == "active":
            log.info("uid=%d releasing stale validation lease=%s", check.uid, lease.lease_id)
            await deallocate(check, lease.lease_id)


async def open_session(lease: Lease, params: RoundParams, uid: int | None = None) -> PogSession:
    """The worker running in ``lease``; a broken channel or failed connect is tried again (a fresh
    SSH connection, ``SESSION_TRIES`` in all) before it fails the test with every try's reason."""
    ssh = lease.info.ssh
    if ssh is None:  # allocate already refused such a lease
        raise MinerFailed("lease has no SSH access")
    errors: list[str] = []
    for attempt in range(SESSION_TRIES):
        try:
            return await PogSession.open(
                ssh.host,
                ssh.port,
                ssh.username,
                lease.key,
                ssh.host_key,
                timeout=min(60.0, params.miner_timeout),
                device=params.device,
                proxy=[arg.format(host=ssh.host, port=ssh.port) for arg in params.lease_proxy],
            )
        except (ChannelBroken, SshFailed) as exc:
            errors.append(str(exc))
            if attempt + 1 < SESSION_TRIES:
                log.info("uid=%s session not opened (%s): trying again", uid, exc)
                await asyncio.sleep(SESSION_RETRY_S[attempt])
        except PogSessionError as exc:
            raise MinerFailed(str(exc)) from None
    raise MinerFailed(f"session not opened in {SESSION_TRIES} tries: " + "; ".join(dict.fromkeys(errors)))
