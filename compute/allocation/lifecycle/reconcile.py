"""Start-up reconcile and the periodic sweep of the allocation manager (a mixin of it).

After a crash the store and the backend disagree; this aligns them without losing a lease:
every ``pending`` lease not being started by this process is rolled back (it never answered its
caller), orphans (backend resources without a live lease) are stopped, live leases adopted and
vanished active ones started again. Each step catches what it can hit and reports it, so one bad
lease never stops the miner from starting. What it deliberately does not do: decide capacity or
ownership (the manager does).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from compute.allocation.lease.failures import BACKEND_TIMEOUT_S, EXPECTED
from compute.protocol import RequestFailed

if TYPE_CHECKING:
    from compute.allocation.lease.backend import Backend
    from compute.allocation.lease.store import LeaseStore, StoredLease
    from compute.allocation.volumes.keeper import VolumeKeeper

logger = logging.getLogger("compute.allocation.lifecycle.manager")


class Reconciler:
    """Needs ``store``, ``backend``, ``_starting`` and the manager's rollback/start/expiry steps."""

    store: LeaseStore
    backend: Backend
    volumes: VolumeKeeper | None
    _starting: set[str]
    _lock: asyncio.Lock

    async def expire_due(self) -> list[str]:
        raise NotImplementedError

    async def _rollback(self, lease_id: str) -> None:
        raise NotImplementedError

    async def _start_again(self, lease: StoredLease) -> None:
        raise NotImplementedError

    async def sweep(self) -> dict[str, list[str]]:
        """Periodic clean-up: expire due leases, roll back stale pending ones, stop orphans."""
        expired = await self.expire_due()
        report = await self._resolve(restart=False)
        report["expired"] = expired
        report["volumes_expired"] = await self._expire_volumes()
        return report

    async def _expire_volumes(self) -> list[str]:
        """Remove volumes unused past their retention (under the allocation lock: no claim races)."""
        if self.volumes is None:
            return []
        async with self._lock:
            return await self.volumes.expire_due(await asyncio.to_thread(self.store.live))

    async def reconcile(self) -> dict[str, list[str]]:
        """At start: align backend with store; every pending lease is rolled back, none is lost.

        Adopts live leases, stops orphans, brings vanished active ones back. Each step catches
        what it can hit (backend, store, timeout) and reports it, so one bad lease never stops
        the miner from starting.
        """
        try:
            await self.expire_due()
        except Exception as exc:
            logger.error("reconcile: expiring due leases failed: %s", exc)
        report = await self._resolve(restart=True)
        if self.volumes is not None:
            try:
                report["volumes_adopted"] = await self.volumes.reconcile()
            except EXPECTED as exc:
                logger.error("reconcile: this miner's volumes could not be listed: %s", exc)
        logger.info("reconciled %s", {k: len(v) for k, v in report.items()})
        return report

    async def _resolve(self, *, restart: bool) -> dict[str, list[str]]:
        report: dict[str, list[str]] = {
            "adopted": [],
            "orphans_stopped": [],
            "restarted": [],
            "rolled_back": [],
            "failed": [],
        }
        for lease in await asyncio.to_thread(self.store.pending):
            if lease.lease_id not in self._starting:
                await self._rollback(lease.lease_id)
                report["rolled_back"].append(lease.lease_id)
        try:
            running = await asyncio.wait_for(self.backend.running(), BACKEND_TIMEOUT_S)
        except EXPECTED as exc:
            logger.error("reconcile: the backend cannot list its leases: %s", exc)
            return report
        live = {lease.lease_id: lease for lease in await asyncio.to_thread(self.store.live)}
        for lease_id in sorted(running - live.keys()):
            try:
                await asyncio.wait_for(self.backend.stop(lease_id), BACKEND_TIMEOUT_S)
                report["orphans_stopped"].append(lease_id)
            except EXPECTED as exc:
                logger.error("reconcile: stopping orphan lease=%s failed: %s", lease_id, exc)
                report["failed"].append(lease_id)
        for lease_id, lease in live.items():
            if lease.state != "active":
                continue
            if lease_id in running and lease.endpoint is not None:
                report["adopted"].append(lease_id)
            elif restart:
                await self._restart_vanished(lease, report)
        return report

    async def _restart_vanished(self, lease: StoredLease, report: dict[str, list[str]]) -> None:
        try:
            await self._start_again(lease)
            report["restarted"].append(lease.lease_id)
        except RequestFailed as exc:
            logger.error("reconcile: lease=%s could not be restarted: %s", lease.lease_id, exc.reason)
            report["failed"].append(lease.lease_id)


__all__ = ["Reconciler"]
