"""Lease lifecycle of a miner: validate, reserve, start, extend, re-key, restart, end, expire.

Rules (documented in docs/miner.md):
- GPUs are exclusive: a lease gets whole free GPUs, never one an active lease holds, and no
  request ever evicts an active lease. CPU, memory and disk are per-lease caps, not pooled.
- Leases with ``gpu_count=0`` (a validator's small test lease, a CPU rental) share the machine,
  so validators can still test a rented machine; a validation lease that asks for GPUs only
  gets GPUs no rental holds. Validation leases share GPUs with each other: two validators proving
  a miner at once (a presence check during another validator's round) both get their lease, so an
  honest miner is never "busy" for a validator (the proofs themselves decide: one GPU holds one
  resident memory matrix at a time). A rental never gets a GPU any live lease holds. A lease
  *beside* the tenants (``purpose="beside"``: a validator's small presence proof of rented GPUs)
  shares every GPU, the rented ones first: a rented GPU is proven there without its tenant
  leaving (docs/presence.md).
- Reservation is atomic: an ``asyncio.Lock`` serialises choosing GPUs and the store's
  ``BEGIN IMMEDIATE`` transaction refuses overlaps, so of two requests for the last free GPU
  exactly one wins and the other gets ``no_capacity``. A backend failure rolls the
  reservation back.
- Only the hotkey that created a lease may act on it (``not_owner``); the miner enforces
  expiry itself (``expire_due`` from a periodic loop) and ``reconcile`` realigns store and
  backend after a restart.
- Crash safety: a lease is stored ``pending``, started, then made ``active`` together with its
  endpoint, so ``active`` always means "the backend started it". Whatever fails in between
  (backend, store, full disk, cancellation) rolls back; a ``pending`` row left by a crash is
  rolled back by ``reconcile`` (and by the periodic sweep once no start is in flight). Ending
  a lease writes the store first and stops the backend second, so a crash in between leaves
  an orphan that reconcile stops, never a ghost. An ``idempotency_key`` returns the first
  attempt's lease to a retry.

What it deliberately does not do: authenticate callers (the transport does), or touch
containers or sockets itself (the backend does).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from compute.allocation.lease.backend import Backend, BackendError, MeasuresActivity, Placement
from compute.allocation.lease.failures import BACKEND_TIMEOUT_S, EXPECTED, failure, is_disk_full
from compute.allocation.lease.records import LeaseRecord, Receipt
from compute.allocation.lease.sshkeys import InvalidPublicKey, validate_public_key
from compute.allocation.lease.store import DuplicateKey, GpuConflict, LeaseStore, StoredLease
from compute.allocation.lifecycle.reconcile import Reconciler
from compute.allocation.volumes.keeper import VolumeKeeper
from compute.protocol import (
    MAX_LEASE_SECONDS,
    AllocateRequest,
    ErrorCode,
    GpuSpec,
    LeaseIdle,
    LeaseInfo,
    RequestFailed,
    Requirements,
    SshAccess,
    VolumeInfo,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ManagerLimits:
    """Caps one lease (and the machine) may not exceed; ``None`` means no cap."""

    max_cpu: int | None = None
    max_memory_gb: float | None = None
    max_disk_gb: float | None = None
    max_lease_s: int = MAX_LEASE_SECONDS
    max_active_leases: int = 64
    max_leases_per_owner: int = 16


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str
    free_gpus: int
    max_duration_s: int


def _fail(code: str, reason: str, status: int) -> RequestFailed:
    return RequestFailed(code, reason, status=status)


class AllocationManager(Reconciler):
    def __init__(
        self,
        store: LeaseStore,
        backend: Backend,
        gpus: list[GpuSpec],
        limits: ManagerLimits = ManagerLimits(),
        clock: Callable[[], float] = time.time,
        volumes: VolumeKeeper | None = None,
        placement: Placement | None = None,
    ) -> None:
        """``volumes``: the persistent-volume policy (None: volume requests are refused);
        ``placement`` (a multi-host backend) keeps each lease on one healthy host."""
        self.store = store
        self.volumes = volumes
        self.placement = placement
        self.backend = backend
        self.gpus = sorted(gpus, key=lambda g: g.index)
        self.limits = limits
        self._clock = clock
        self._lock = asyncio.Lock()
        self._starting: set[str] = set()  # pending leases whose start runs in this process
        self._idle_seen: dict[str, LeaseIdle] = {}  # the idle watch's last finding per lease

    # ---------------------------------------------------------------- capacity

    def free_gpus(self, purpose: str = "rental") -> list[GpuSpec]:
        """GPUs a lease of ``purpose`` could get now: a rental only unheld ones; a validation lease
        any GPU no rental holds (validators' proofs share GPUs; see the module docstring); a lease
        beside the tenants every GPU, the rented ones first."""
        if purpose == "beside":
            rented = self.store.held_gpus(only_rentals=True)
            free = sorted(self.gpus, key=lambda gpu: gpu.index not in rented)
        else:
            held = self.store.held_gpus(only_rentals=purpose == "validation")
            free = [gpu for gpu in self.gpus if gpu.index not in held]
        return free if self.placement is None else self.placement.usable(free)

    def _unsupported(self, req: Requirements) -> str | None:
        """Why this machine can never satisfy ``req`` (whatever is rented), or None."""
        lim = self.limits
        if req.host is not None and self.placement is None:
            return f"this miner has a single host; no host {req.host!r}"
        if self.placement is not None and req.gpu_count > self.placement.largest_host():
            return (
                f"requested {req.gpu_count} GPUs; a lease runs on one host and the largest here "
                f"has {self.placement.largest_host()}"
            )
        if req.gpu_count > len(self.gpus):
            return f"requested {req.gpu_count} GPUs; this machine rents out {len(self.gpus)}"
        if req.gpu_count and len(self._matching(req, self.gpus)) < req.gpu_count:
            models = sorted({g.name for g in self.gpus}) or ["none"]
            return (
                f"no {req.gpu_count} GPU(s) match model={req.gpu_model!r} with >= {req.min_gpu_memory_gb} GB; "
                f"this machine has {', '.join(models)}"
            )
        if lim.max_cpu is not None and req.cpu_count > lim.max_cpu:
            return f"requested {req.cpu_count} CPUs; this miner allows at most {lim.max_cpu} per lease"
        if lim.max_memory_gb is not None and req.memory_gb > lim.max_memory_gb:
            return f"requested {req.memory_gb} GB memory; this miner allows at most {lim.max_memory_gb} GB"
        if lim.max_disk_gb is not None and req.disk_gb > lim.max_disk_gb:
            return f"requested {req.disk_gb} GB disk; this miner allows at most {lim.max_disk_gb} GB"
        if req.volume is not None and self.volumes is None:
            return f"this miner's {self.backend.name} backend offers no persistent volumes"
        if req.overlay and not getattr(self.backend, "overlay", False):
            return (
                f"this miner's {self.backend.name} backend gives leases no overlay (TUN device and UDP "
                "port); its leases reach each other through the host's network: ask without an overlay"
            )
        if req.idle_stop_s is not None and not isinstance(self.backend, MeasuresActivity):
            return f"this miner's {self.backend.name} backend cannot measure activity: no idle stop"
        return None

    @staticmethod
    def _matching(req: Requirements, gpus: list[GpuSpec]) -> list[GpuSpec]:
        want = (req.gpu_model or "").lower()
        need = req.min_gpu_memory_gb * 1e9
        return [g for g in gpus if want in g.name.lower() and g.memory_bytes >= need]

    def check(self, req: Requirements) -> Availability:
        """Whether ``req`` could be allocated now (advisory: allocate re-checks atomically)."""
        free = self.free_gpus()
        reason = self._unsupported(req)
        if reason is None and len(self._matching(req, free)) < req.gpu_count:
            reason = f"only {len(self._matching(req, free))} matching GPU(s) free; {req.gpu_count} requested"
        if reason is None and len(self.store.live()) >= self.limits.max_active_leases:
            reason = f"this miner runs its maximum of {self.limits.max_active_leases} leases"
        return Availability(reason is None, reason or "", len(free), self.limits.max_lease_s)

    # ---------------------------------------------------------------- allocate

    async def allocate(
        self, owner_hotkey: str, request: AllocateRequest, receipt: Receipt | None = None
    ) -> LeaseInfo:
        """Reserve and start a lease; ``receipt`` (the signed request) is kept for rentals."""
        req = request.requirements
        if request.duration_s > self.limits.max_lease_s:
            raise _fail(
                ErrorCode.INVALID_REQUEST,
                f"duration {request.duration_s}s exceeds this miner's maximum of {self.limits.max_lease_s}s",
                400,
            )
        reason = self._unsupported(req)
        if reason is not None:
            raise _fail(ErrorCode.UNSUPPORTED, reason, 409)
        try:
            public_key = validate_public_key(request.ssh_public_key)
        except InvalidPublicKey as exc:
            raise _fail(ErrorCode.INVALID_REQUEST, f"ssh_public_key refused: {exc}", 400) from None
        if req.volume is not None and self.volumes is not None:
            await self.volumes.measure(owner_hotkey, req.volume.name)  # du off the allocation lock
        lease, fresh = await self._reserve(owner_hotkey, request, public_key)
        if not fresh:
            return self._replayed(lease)
        try:
            endpoint = await asyncio.wait_for(self.backend.start(lease.record), BACKEND_TIMEOUT_S)
            await asyncio.to_thread(self.store.activate, lease.lease_id, endpoint)
        except EXPECTED as exc:
            logger.warning("allocate failed lease=%s owner=%s: %s", lease.lease_id, owner_hotkey, exc)
            await self._rollback(lease.lease_id)
            raise failure("the miner could not start the lease", exc) from None
        except BaseException:
            await self._rollback(lease.lease_id)
            raise
        finally:
            self._starting.discard(lease.lease_id)
        if receipt is not None and request.purpose == "rental":
            try:  # the lease runs: a lost receipt only costs this miner rental credit, never the lease
                await asyncio.to_thread(self.store.set_receipt, lease.lease_id, receipt)
            except EXPECTED as exc:
                logger.warning("lease=%s receipt not stored: %s", lease.lease_id, exc)
        logger.info(
            "allocated lease=%s owner=%s purpose=%s gpus=%s port=%s until=%.0f",
            lease.lease_id,
            owner_hotkey,
            request.purpose,
            list(lease.record.gpus),
            endpoint.ssh_port,
            lease.record.expires_at,
        )
        return await self._info(lease.lease_id)

    def _replayed(self, lease: StoredLease) -> LeaseInfo:
        """The answer to a retried allocate: the lease its first attempt made."""
        if lease.state == "pending":
            raise _fail(ErrorCode.BUSY, f"lease {lease.lease_id} for this idempotency key is starting", 409)
        logger.info("allocate replayed lease=%s owner=%s", lease.lease_id, lease.record.owner_hotkey)
        return self._to_info(lease)

    async def _reserve(
        self, owner: str, request: AllocateRequest, public_key: str
    ) -> tuple[StoredLease, bool]:
        """A new ``pending`` lease (True), or the lease an earlier attempt with this key made."""
        req = request.requirements
        async with self._lock:
            if request.idempotency_key is not None:
                prior = await asyncio.to_thread(self.store.by_key, owner, request.idempotency_key)
                if prior is not None:
                    return prior, False
            active = await asyncio.to_thread(self.store.live)
            if len(active) >= self.limits.max_active_leases:
                raise _fail(
                    ErrorCode.NO_CAPACITY, f"this miner runs its maximum of {len(active)} leases", 409
                )
            if sum(1 for s in active if s.record.owner_hotkey == owner) >= self.limits.max_leases_per_owner:
                raise _fail(
                    ErrorCode.NO_CAPACITY,
                    f"hotkey already holds {self.limits.max_leases_per_owner} active leases on this miner",
                    409,
                )
            candidates = self._matching(req, self.free_gpus(request.purpose))
            if len(candidates) < req.gpu_count:
                raise _fail(
                    ErrorCode.NO_CAPACITY,
                    f"only {len(candidates)} matching GPU(s) free; {req.gpu_count} requested",
                    409,
                )
            if req.volume is not None and self.volumes is not None:
                await self.volumes.claim(owner, req.volume, active)
            chosen, host = tuple(g.index for g in candidates[: req.gpu_count]), None
            if self.placement is not None:
                try:
                    chosen, host = self.placement.place(candidates, req.gpu_count, req.host)
                except BackendError as exc:
                    raise _fail(ErrorCode.NO_CAPACITY, str(exc), 409) from None
            now = self._clock()
            memory_mb = math.ceil(req.memory_gb * 1024)
            record = LeaseRecord(
                lease_id=uuid.uuid4().hex,
                owner_hotkey=owner,
                purpose=request.purpose,
                gpus=chosen,
                cpu_count=req.cpu_count,
                memory_mb=memory_mb,
                disk_gb=math.ceil(req.disk_gb),
                shm_mb=max(64, memory_mb // 4),
                extra_ports=req.extra_ports,
                ssh_public_key=public_key,
                created_at=now,
                expires_at=now + request.duration_s,
                template=req.template,
                volume=req.volume.name if req.volume is not None else None,
                host=host,
                overlay=req.overlay,
            )
            lease = StoredLease(
                record=record,
                state="pending",
                requirements_json=req.model_dump_json(),
                idempotency_key=request.idempotency_key,
            )
            self._starting.add(record.lease_id)  # before the row exists, so no sweep rolls it back
            try:
                await self._insert(lease)
            except BaseException:
                self._starting.discard(record.lease_id)
                raise
            return lease, True

    async def _insert(self, lease: StoredLease) -> None:
        try:
            await asyncio.to_thread(self.store.reserve, lease)
        except GpuConflict as exc:
            raise _fail(ErrorCode.NO_CAPACITY, str(exc), 409) from None
        except DuplicateKey as exc:
            raise _fail(ErrorCode.BUSY, str(exc), 409) from None
        except EXPECTED as exc:
            raise failure("the miner could not record the lease", exc) from None

    async def _rollback(self, lease_id: str) -> None:
        """Undo a pending lease; never raises (a row it cannot delete stays pending for the sweep)."""
        try:
            await asyncio.wait_for(self.backend.stop(lease_id), BACKEND_TIMEOUT_S)
        except Exception as exc:
            logger.warning("rollback: stopping lease=%s failed: %s", lease_id, exc)
        try:
            await asyncio.to_thread(self.store.delete, lease_id)
        except Exception as exc:
            logger.warning("rollback: deleting lease=%s failed (reconcile retries): %s", lease_id, exc)

    # ---------------------------------------------------------------- owner actions

    async def _owned(self, caller: str, lease_id: str, *, active: bool) -> StoredLease:
        lease = await asyncio.to_thread(self.store.get, lease_id)
        if lease is None or lease.state == "pending":
            raise _fail(ErrorCode.LEASE_NOT_FOUND, f"no lease {lease_id} on this miner", 404)
        if lease.record.owner_hotkey != caller:
            raise _fail(ErrorCode.NOT_OWNER, f"lease {lease_id} belongs to another hotkey", 403)
        if lease.state == "active" and lease.record.expires_at <= self._clock():
            await self._end(lease, "expired")
            lease = await asyncio.to_thread(self.store.get, lease_id)
            assert lease is not None
        if active and lease.state != "active":
            raise _fail(ErrorCode.LEASE_EXPIRED, f"lease {lease_id} is {lease.state}", 410)
        return lease

    async def status(self, caller: str, lease_id: str) -> LeaseInfo:
        await self._owned(caller, lease_id, active=False)
        return await self._info(lease_id)

    async def list(self, owner_hotkey: str) -> list[LeaseInfo]:
        leases = await asyncio.to_thread(self.store.by_owner, owner_hotkey)
        return [self._to_info(lease) for lease in leases]

    async def extend(self, caller: str, lease_id: str, duration_s: int) -> LeaseInfo:
        lease = await self._owned(caller, lease_id, active=True)
        new_expiry = lease.record.expires_at + duration_s
        if new_expiry - self._clock() > self.limits.max_lease_s:
            raise _fail(
                ErrorCode.INVALID_REQUEST,
                f"the lease would run {new_expiry - self._clock():.0f}s from now; "
                f"this miner's maximum is {self.limits.max_lease_s}s",
                400,
            )
        await asyncio.to_thread(self.store.set_expiry, lease_id, new_expiry)
        logger.info("extended lease=%s owner=%s until=%.0f", lease_id, caller, new_expiry)
        return await self._info(lease_id)

    async def exchange_key(self, caller: str, lease_id: str, ssh_public_key: str) -> LeaseInfo:
        await self._owned(caller, lease_id, active=True)
        try:
            public_key = validate_public_key(ssh_public_key)
        except InvalidPublicKey as exc:
            raise _fail(ErrorCode.INVALID_REQUEST, f"ssh_public_key refused: {exc}", 400) from None
        await self._backend_call("exchange key", self.backend.set_authorized_key(lease_id, public_key))
        await asyncio.to_thread(self.store.set_key, lease_id, public_key)
        logger.info("exchanged key lease=%s owner=%s", lease_id, caller)
        return await self._info(lease_id)

    async def restart(self, caller: str, lease_id: str) -> LeaseInfo:
        lease = await self._owned(caller, lease_id, active=True)
        if lease_id in await self.backend.running():
            await self._backend_call("restart", self.backend.restart(lease_id))
        else:
            await self._start_again(lease)
        logger.info("restarted lease=%s owner=%s", lease_id, caller)
        return await self._info(lease_id)

    async def deallocate(self, caller: str, lease_id: str) -> None:
        """End the caller's lease; idempotent for a lease that already ended."""
        lease = await self._owned(caller, lease_id, active=False)
        if lease.state == "active":
            await self._end(lease, "released")
        logger.info("deallocated lease=%s owner=%s", lease_id, caller)

    async def _backend_call(self, what: str, call) -> None:  # noqa: ANN001 - a coroutine
        try:
            await asyncio.wait_for(call, BACKEND_TIMEOUT_S)
        except EXPECTED as exc:
            raise failure(f"{what} failed on the miner", exc) from None

    async def _start_again(self, lease: StoredLease) -> None:
        try:
            endpoint = await asyncio.wait_for(self.backend.start(lease.record), BACKEND_TIMEOUT_S)
            await asyncio.to_thread(self.store.set_endpoint, lease.lease_id, endpoint)
        except EXPECTED as exc:
            raise failure("restarting the lease failed", exc) from None

    async def _end(self, lease: StoredLease, state: Literal["expired", "released"]) -> None:
        """Mark ended first, stop second: a crash between leaves an orphan reconcile stops. On a
        full disk the mark cannot be written: the lease is stopped first (its container's files
        go, which frees space) and the mark written then; still full, a clean 507."""
        stopped = False
        try:
            await asyncio.to_thread(self.store.end, lease.lease_id, state, self._clock())
        except EXPECTED as exc:
            if not is_disk_full(exc):
                raise failure("ending the lease failed", exc) from None
            logger.warning("lease=%s: disk full, stopping it before it is marked %s", lease.lease_id, state)
            await self._stop_quietly(lease.lease_id, state)
            stopped = True
            try:
                await asyncio.to_thread(self.store.end, lease.lease_id, state, self._clock())
            except EXPECTED as again:
                raise failure("ending the lease failed", again) from None
        if not stopped:
            await self._stop_quietly(lease.lease_id, state)
        if self.volumes is not None:
            await self.volumes.released(lease)

    async def _stop_quietly(self, lease_id: str, state: str) -> None:
        try:
            await asyncio.wait_for(self.backend.stop(lease_id), BACKEND_TIMEOUT_S)
        except EXPECTED as exc:
            logger.warning(
                "stopping lease=%s failed (%s); marked %s, the sweep retries", lease_id, exc, state
            )

    async def stop_over_disk(self, lease_id: str) -> bool:
        """End an active lease that wrote past its disk size (the disk watch): ``expired``."""
        lease = await asyncio.to_thread(self.store.get, lease_id)
        if lease is None or lease.state != "active":
            return False
        await self._end(lease, "expired")
        return True

    async def stop_idle(self, lease_id: str, idle_s: float) -> bool:
        """End an active lease whose idle stop fired: ``expired`` before its term. False when it
        had already ended."""
        lease = await asyncio.to_thread(self.store.get, lease_id)
        if lease is None or lease.state != "active":
            return False
        await self._end(lease, "expired")
        logger.info(
            "idle stop lease=%s owner=%s idle for %.0fs (asked: stop after %ss)",
            lease_id,
            lease.record.owner_hotkey,
            idle_s,
            idle_stop_s(lease),
        )
        return True

    def note_idle(self, lease_id: str, seen: LeaseIdle | None) -> None:
        """The idle watch's latest finding for a lease (None: forget it)."""
        if seen is None:
            self._idle_seen.pop(lease_id, None)
        else:
            self._idle_seen[lease_id] = seen

    # ---------------------------------------------------------------- volumes

    async def list_volumes(self, caller: str) -> builtins.list[VolumeInfo]:
        """The caller's own persistent volumes (never another hotkey's)."""
        if self.volumes is None:
            return []
        return await self.volumes.infos(caller, await asyncio.to_thread(self.store.live))

    async def delete_volume(self, caller: str, name: str) -> None:
        if self.volumes is None:
            raise _fail(ErrorCode.VOLUME_NOT_FOUND, f"you have no volume named {name!r} on this miner", 404)
        async with self._lock:  # no allocate may claim it meanwhile
            await self.volumes.delete(caller, name, await asyncio.to_thread(self.store.live))

    # ---------------------------------------------------------------- periodic work

    async def expire_due(self) -> builtins.list[str]:  # builtins: .list is a method here
        """Stop and mark every active lease past its expiry; returns their ids."""
        due = await asyncio.to_thread(self.store.due, self._clock())
        for lease in due:
            await self._end(lease, "expired")
            logger.info("expired lease=%s owner=%s", lease.lease_id, lease.record.owner_hotkey)
        return [lease.lease_id for lease in due]

    # ---------------------------------------------------------------- views

    async def _info(self, lease_id: str) -> LeaseInfo:
        lease = await asyncio.to_thread(self.store.get, lease_id)
        assert lease is not None
        return self._to_info(lease)

    def _to_info(self, lease: StoredLease) -> LeaseInfo:
        by_index = {g.index: g for g in self.gpus}
        endpoint = lease.endpoint
        ssh = None
        if endpoint is not None and lease.state == "active":
            ssh = SshAccess(
                host=endpoint.host,
                port=endpoint.ssh_port,
                username=endpoint.username,
                host_key=endpoint.host_key,
                ports=dict(endpoint.ports),
                udp_ports=dict(endpoint.udp_ports),
            )
        record = lease.record
        requirements = Requirements.model_validate_json(lease.requirements_json)
        return LeaseInfo(
            lease_id=record.lease_id,
            owner_hotkey=record.owner_hotkey,
            purpose=record.purpose,
            state=lease.state,
            requirements=requirements,
            gpus=[by_index[i] for i in record.gpus if i in by_index],
            ssh=ssh,
            created_at=record.created_at,
            expires_at=record.expires_at,
            host=record.host,
            idle=self._idle_info(lease, requirements.idle_stop_s),
        )

    def _idle_info(self, lease: StoredLease, stop_after_s: int | None) -> LeaseIdle | None:
        """The idle watch's view; ``stopped`` is read from the store: the only way a lease ends as
        ``expired`` before its term is its idle stop."""
        if stop_after_s is None:
            return None
        stopped = (
            lease.state == "expired"
            and lease.ended_at is not None
            and lease.ended_at < lease.record.expires_at
        )
        seen = self._idle_seen.get(lease.lease_id) if lease.state == "active" else None
        base = seen or LeaseIdle(stop_after_s=stop_after_s)
        return base.model_copy(update={"stop_after_s": stop_after_s, "stopped": stopped})

    def info(self, lease: StoredLease) -> LeaseInfo:
        """The wire view of a stored lease (SSH access only while active)."""
        return self._to_info(lease)

    async def active_count(self) -> int:
        return len(await asyncio.to_thread(self.store.live))


def idle_stop_s(lease: StoredLease) -> int | None:
    """The idle stop a stored lease asked for (kept in its requirements JSON)."""
    try:
        value = json.loads(lease.requirements_json).get("idle_stop_s")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


__all__ = ["AllocationManager", "Availability", "ManagerLimits", "Placement"]
