"""Lease health: the miner watches every active lease and brings a dead one back.

Each ``check_once`` asks the backend which leases have live resources and probes each active
lease's SSH port for an ``SSH-`` banner (container running *and* sshd answering). A lease that
fails either is restarted through ``AllocationManager.restart`` (the same container, host key and
volumes when it still exists; a new start with the stored host key otherwise), counted, and
watched: down longer than ``lost_after_s`` it becomes ``lost``, logged at ERROR once and shown to
its renter (``LeaseInfo.health``), and restarts are still tried every check: never dropped quietly.

State is in memory: after a miner restart, ``reconcile`` restarts vanished leases and the watch
starts over. Deliberately not here: expiry (the manager's sweep) or scoring.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from compute.allocation.lease.ports import ssh_banner
from compute.allocation.lifecycle.manager import AllocationManager
from compute.protocol import LeaseHealth, LeaseInfo, RequestFailed

log = logging.getLogger(__name__)

Probe = Callable[[str, int], Awaitable[bool]]
CHECK_TIMEOUT_S = 120.0


class HealthMonitor:
    """Watches the manager's active leases; ``check_once`` is one pass (run it periodically)."""

    def __init__(
        self,
        manager: AllocationManager,
        probe_host: str = "127.0.0.1",
        lost_after_s: float = 600.0,
        clock: Callable[[], float] = time.time,
        probe: Probe = ssh_banner,
        host_addresses: Mapping[str, str] | None = None,
    ) -> None:
        """``host_addresses``: where to probe the leases of each remote host (multi-host miners)."""
        self.manager = manager
        self.probe_host = "127.0.0.1" if probe_host in ("", "0.0.0.0", "::") else probe_host
        self.lost_after_s = lost_after_s
        self._clock = clock
        self._probe = probe
        self._health: dict[str, LeaseHealth] = {}
        self._host_addresses = dict(host_addresses or {})

    def health(self, lease_id: str) -> LeaseHealth | None:
        return self._health.get(lease_id)

    def annotate(self, lease: LeaseInfo) -> LeaseInfo:
        """``lease`` with its health attached (unchanged when never checked or not active)."""
        health = self._health.get(lease.lease_id)
        if health is None or lease.state != "active":
            return lease
        return lease.model_copy(update={"health": health})

    async def _alive(
        self, lease_id: str, port: int | None, running: set[str], host: str | None = None
    ) -> str:
        """'' when healthy, else why not."""
        if lease_id not in running:
            return "container not running"
        if port is None:
            return "no endpoint recorded"
        if not await self._probe(self._host_addresses.get(host or "", self.probe_host), port):
            return "sshd not answering"
        return ""

    async def check_once(self) -> dict[str, LeaseHealth]:
        """Probe every active lease, restart dead ones; returns the health of each."""
        leases = await asyncio.to_thread(self.manager.store.active)
        running = await asyncio.wait_for(self.manager.backend.running(), CHECK_TIMEOUT_S)
        seen = set()
        for lease in leases:
            seen.add(lease.lease_id)
            port = lease.endpoint.ssh_port if lease.endpoint else None
            why = await self._alive(lease.lease_id, port, running, lease.record.host)
            if not why:
                self._mark_up(lease.lease_id)
                continue
            await self._recover(lease.lease_id, lease.record.owner_hotkey, why, lease.record.host)
        for gone in set(self._health) - seen:  # ended leases: nothing left to watch
            del self._health[gone]
        return dict(self._health)

    def _mark_up(self, lease_id: str) -> None:
        before = self._health.get(lease_id)
        restarts = before.restarts if before else 0
        if before is not None and before.status != "up":
            log.info("lease=%s healthy again after %d restart(s)", lease_id, restarts)
        self._health[lease_id] = LeaseHealth(status="up", checked_at=self._clock(), restarts=restarts)

    async def _recover(self, lease_id: str, owner: str, why: str, host: str | None = None) -> None:
        now = self._clock()
        before = self._health.get(lease_id)
        down_since = before.down_since if before and before.down_since is not None else now
        restarts = before.restarts if before else 0
        log.warning("lease=%s owner=%s is down (%s); restarting", lease_id, owner, why)
        try:
            info = await asyncio.wait_for(self.manager.restart(owner, lease_id), CHECK_TIMEOUT_S)
            restarts += 1
            port = info.ssh.port if info.ssh else None
            why = await self._alive(lease_id, port, await self.manager.backend.running(), host)
        except (RequestFailed, asyncio.TimeoutError) as exc:
            why = f"restart failed: {getattr(exc, 'reason', None) or exc!r}"
        if not why:
            log.info("lease=%s restarted and answering (restart %d)", lease_id, restarts)
            self._health[lease_id] = LeaseHealth(status="up", checked_at=now, restarts=restarts)
            return
        lost = now - down_since >= self.lost_after_s
        if lost and (before is None or before.status != "lost"):
            log.error(
                "lease=%s owner=%s down for %.0fs (threshold %.0fs): %s; reported as lost, still retried",
                lease_id,
                owner,
                now - down_since,
                self.lost_after_s,
                why,
            )
        self._health[lease_id] = LeaseHealth(
            status="lost" if lost else "down",
            checked_at=now,
            down_since=down_since,
            restarts=restarts,
            reason=why[:500],
        )
