"""Who may use which persistent volume, how much, and for how long (the miner's volume policy).

- A volume belongs to the hotkey whose allocate created it; names are per hotkey, so another
  renter asking for the same name gets its own volume and never learns of the first one.
- One live lease at a time: a volume a pending or active lease uses is ``volume_busy``.
- Caps: a size per volume (``size_gb`` given at creation), a total per renter and a total per
  miner (sizes as declared, since images are sparse), a count per renter; refusals are
  ``volume_quota``. In ``watch`` mode a volume measured over its size is not attached again.
- Retention: when the last lease using a volume ends, its retention starts; ``expire_due``
  (the miner's sweep) removes volumes unused past it, data and all. ``delete`` removes one now,
  refused while attached.
- Crash safety: a volume is written down ``creating`` before the driver makes it and ``removing``
  before the driver removes it; ``reconcile`` (miner start) finishes both (a creation completed or
  undone, a removal finished) and adopts this miner's labelled Docker volumes missing from the
  store, so a ``kill -9`` at any point leaves no volume listed but unusable.
- Watched volumes are measured (``measure``, ``du`` in a container) before the allocation lock is
  taken; under it only the cached figure is read.

Called by :class:`compute.allocation.lifecycle.manager.AllocationManager` under its allocation lock; the
Docker work is the driver's (:class:`compute.allocation.volumes.driver.DockerVolumes`).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from compute.allocation.lease.backend import BackendError
from compute.allocation.lease.failures import BACKEND_TIMEOUT_S, failure
from compute.allocation.lease.store import StoredLease
from compute.allocation.volumes.store import VolumeRow, VolumeStore
from compute.protocol import ErrorCode, RequestFailed, VolumeInfo, VolumeRequest

log = logging.getLogger(__name__)


class VolumeDriver(Protocol):
    @property
    def quota(self) -> Literal["hard", "watch"]: ...

    async def create(self, owner: str, name: str, size_gb: float) -> None: ...

    async def remove(self, owner: str, name: str) -> None: ...

    async def usage_gb(self, owner: str, name: str) -> float | None: ...

    def cached_usage_gb(self, owner: str, name: str) -> float | None: ...

    async def found(self) -> list: ...


@dataclass(frozen=True)
class VolumeLimits:
    max_total_gb: float = 1000.0  # all volumes of this miner (declared sizes)
    max_per_renter_gb: float = 200.0
    max_per_renter: int = 16  # volumes per renter hotkey
    default_size_gb: float = 10.0  # when the request names no size
    retention_s: float = 7 * 86400.0  # kept this long after the last lease using it ended


def _refuse(code: str, reason: str, status: int) -> RequestFailed:
    return RequestFailed(code, reason, status=status)


def users(leases: Iterable[StoredLease]) -> dict[tuple[str, str], str]:
    """(owner, volume name) -> the live lease using it."""
    return {
        (lease.record.owner_hotkey, lease.record.volume): lease.lease_id
        for lease in leases
        if lease.record.volume
    }


class VolumeKeeper:
    def __init__(
        self,
        store: VolumeStore,
        driver: VolumeDriver,
        limits: VolumeLimits = VolumeLimits(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.driver = driver
        self.limits = limits
        self._clock = clock

    async def claim(self, owner: str, request: VolumeRequest, live: list[StoredLease]) -> VolumeRow:
        """The volume a new lease of ``owner`` will use, created if new; raises RequestFailed."""
        busy = users(live).get((owner, request.name))
        if busy is not None:
            raise _refuse(
                ErrorCode.VOLUME_BUSY,
                f"volume {request.name!r} is attached to your lease {busy}; a volume serves one lease at a time",
                409,
            )
        row = await asyncio.to_thread(self.store.get, owner, request.name)
        if row is not None and row.state == "removing":  # a removal a crash interrupted: finish it
            await self._remove(row, "removal interrupted by a restart, finished")
            row = None
        if row is not None:
            await self._check_existing(row, request)
            if row.state == "creating":  # a creation a crash interrupted: finish it (idempotent)
                await self._make(row, undo=False)
            return row
        row = await self._admit_new(owner, request)
        await self._make(row, undo=True)
        return row

    async def _make(self, row: VolumeRow, undo: bool) -> None:
        """Have the driver make ``row``'s volume (idempotent), then mark it ready. A failure is the
        caller's clean error (507 for a full disk); ``undo`` forgets a volume made in this call."""
        try:
            await asyncio.wait_for(self.driver.create(row.owner, row.name, row.size_gb), BACKEND_TIMEOUT_S)
            await asyncio.to_thread(self.store.set_state, row.owner, row.name, "ready")
        except (BackendError, OSError, sqlite3.Error, asyncio.TimeoutError) as exc:
            if undo:
                await self._undo(row)
            raise failure(f"volume {row.name!r} could not be created", exc) from None

    async def _undo(self, row: VolumeRow) -> None:
        """Forget a volume that never became ready (nothing was ever written to it)."""
        try:
            await asyncio.wait_for(self.driver.remove(row.owner, row.name), BACKEND_TIMEOUT_S)
            await asyncio.to_thread(self.store.delete, row.owner, row.name)
        except (BackendError, OSError, sqlite3.Error, asyncio.TimeoutError) as exc:
            log.warning(
                "volume=%s owner=%s left 'creating' (finished or undone at restart): %s",
                row.name,
                row.owner,
                exc,
            )

    async def _check_existing(self, row: VolumeRow, request: VolumeRequest) -> None:
        if request.size_gb is not None and abs(request.size_gb - row.size_gb) > 1e-9:
            raise _refuse(
                ErrorCode.INVALID_REQUEST,
                f"volume {row.name!r} exists with {row.size_gb:g} GB; ask without a size or delete it first",
                409,
            )
        if row.quota == "watch":  # measured before the allocation lock was taken (measure())
            used = self.driver.cached_usage_gb(row.owner, row.name)
            if used is not None and used > row.size_gb:
                raise _refuse(
                    ErrorCode.VOLUME_QUOTA,
                    f"volume {row.name!r} holds {used:.2f} GB, over its {row.size_gb:g} GB; "
                    "delete it (or its data on a lease without it) first",
                    409,
                )

    async def _admit_new(self, owner: str, request: VolumeRequest) -> VolumeRow:
        size = request.size_gb if request.size_gb is not None else self.limits.default_size_gb
        rows = await asyncio.to_thread(self.store.all)
        mine = [r for r in rows if r.owner == owner]
        lim = self.limits
        if len(mine) >= lim.max_per_renter:
            raise _refuse(
                ErrorCode.VOLUME_QUOTA, f"you already hold {len(mine)} volumes here (the most)", 409
            )
        if sum(r.size_gb for r in mine) + size > lim.max_per_renter_gb + 1e-9:
            raise _refuse(
                ErrorCode.VOLUME_QUOTA,
                f"{size:g} GB more would exceed this miner's {lim.max_per_renter_gb:g} GB of volumes per renter "
                f"(you hold {sum(r.size_gb for r in mine):g} GB)",
                409,
            )
        if sum(r.size_gb for r in rows) + size > lim.max_total_gb + 1e-9:
            raise _refuse(ErrorCode.VOLUME_QUOTA, f"this miner has no room for a {size:g} GB volume", 409)
        now = self._clock()
        row = VolumeRow(owner, request.name, size, self.driver.quota, now, now, lim.retention_s, "creating")
        if not await asyncio.to_thread(self.store.insert, row):
            raise _refuse(ErrorCode.BUSY, f"volume {request.name!r} is being created; retry", 409)
        return row

    async def released(self, lease: StoredLease) -> None:
        """A lease ended: its volume's retention starts now (never raises: the lease has ended)."""
        if not lease.record.volume:
            return
        try:
            await asyncio.to_thread(
                self.store.used,
                lease.record.owner_hotkey,
                lease.record.volume,
                self._clock(),
                self.limits.retention_s,
            )
        except (sqlite3.Error, OSError) as exc:  # retention then counts from the last recorded use
            log.warning(
                "volume=%s lease=%s last use not recorded: %s", lease.record.volume, lease.lease_id, exc
            )

    async def infos(self, owner: str, live: list[StoredLease]) -> list[VolumeInfo]:
        attached = users(live)
        infos = []
        for row in await asyncio.to_thread(self.store.by_owner, owner):
            lease = attached.get((owner, row.name))
            used = await self.driver.usage_gb(owner, row.name)
            infos.append(
                VolumeInfo(
                    name=row.name,
                    size_gb=row.size_gb,
                    used_gb=used,
                    quota="hard" if row.quota == "hard" else "watch",
                    over_quota=used is not None and used > row.size_gb,
                    created_at=row.created_at,
                    last_used_at=row.last_used_at,
                    attached_lease=lease,
                    expires_at=None if lease else row.expires_at,
                )
            )
        return infos

    async def delete(self, owner: str, name: str, live: list[StoredLease]) -> None:
        row = await asyncio.to_thread(self.store.get, owner, name)
        if row is None:
            raise _refuse(ErrorCode.VOLUME_NOT_FOUND, f"you have no volume named {name!r} on this miner", 404)
        lease = users(live).get((owner, name))
        if lease is not None:
            raise _refuse(
                ErrorCode.VOLUME_BUSY, f"volume {name!r} is attached to your lease {lease}; end it first", 409
            )
        await self._remove(row, "deleted by its owner")

    async def measure(self, owner: str, name: str) -> None:
        """Measure a watched volume's usage now, *before* the allocation lock is taken (``du`` in a
        container may take long); ``claim`` then reads the cached figure."""
        row = await asyncio.to_thread(self.store.get, owner, name)
        if row is not None and row.quota == "watch" and row.state == "ready":
            await self.driver.usage_gb(owner, name)

    async def _remove(self, row: VolumeRow, why: str) -> None:
        await asyncio.to_thread(self.store.set_state, row.owner, row.name, "removing")  # journal first
        try:
            await asyncio.wait_for(self.driver.remove(row.owner, row.name), BACKEND_TIMEOUT_S)
        except (BackendError, OSError, asyncio.TimeoutError) as exc:
            raise failure(f"volume {row.name!r} could not be removed", exc) from None
        await asyncio.to_thread(self.store.delete, row.owner, row.name)
        log.info("volume=%s owner=%s removed (%s)", row.name, row.owner, why)

    async def expire_due(self, live: list[StoredLease]) -> list[str]:
        """Remove every unattached volume past its retention; returns ``owner/name`` of each."""
        attached = users(live)
        now = self._clock()
        gone = []
        for row in await asyncio.to_thread(self.store.all):
            if (row.owner, row.name) in attached or row.expires_at > now:
                continue
            try:
                await self._remove(
                    row, f"unused since {row.last_used_at:.0f}, retention {row.retention_s:.0f}s"
                )
            except RequestFailed as exc:
                log.warning("volume=%s owner=%s not expired yet: %s", row.name, row.owner, exc.reason)
                continue
            gone.append(f"{row.owner}/{row.name}")
        return gone

    async def reconcile(self) -> list[str]:
        """Finish what a crash interrupted (a creation is completed or undone, a removal finished),
        then adopt this miner's labelled volumes the store lost; returns ``owner/name`` of each."""
        for row in await asyncio.to_thread(self.store.all):
            try:
                if row.state == "removing":
                    await self._remove(row, "removal interrupted by a restart, finished")
                elif row.state == "creating":
                    await self._make(row, undo=True)
                    log.info(
                        "volume=%s owner=%s creation interrupted by a restart, finished", row.name, row.owner
                    )
            except RequestFailed as exc:
                log.warning("volume=%s owner=%s not recovered yet: %s", row.name, row.owner, exc.reason)
        known = {(r.owner, r.name) for r in await asyncio.to_thread(self.store.all)}
        adopted = []
        now = self._clock()
        for found in await self.driver.found():
            if not found.owner or (found.owner, found.name) in known:
                continue
            row = VolumeRow(
                found.owner, found.name, found.size_gb, self.driver.quota, now, now, self.limits.retention_s
            )
            if await asyncio.to_thread(self.store.insert, row):
                adopted.append(f"{found.owner}/{found.name}")
                log.info("volume=%s owner=%s adopted from its Docker labels", found.name, found.owner)
        return adopted


__all__ = ["VolumeDriver", "VolumeKeeper", "VolumeLimits", "users"]
