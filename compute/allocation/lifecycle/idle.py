"""The idle watch: ends a lease that asked for an idle stop once it has been idle that long.

A renter opts in per lease (``Requirements.idle_stop_s``, signed in its allocate request). Every
``check_once`` (the miner's ``idle`` loop, once a minute) samples each such lease through its
backend (``MeasuresActivity.activity``: host-side counters, see ``lease.activity``) and compares
the sample with the previous one. ``idle_since`` is the start of the current run of idle
intervals; any busy interval, a failed or late sample, or a miner restart (the state is in memory)
starts the run over, so the watch can only end a lease that was *measured* idle for the whole
window. When the run reaches the lease's idle stop, the manager ends it as ``expired`` before its
term (``LeaseInfo.idle.stopped``), which frees its GPUs for other renters and validators.

Deliberately not here: what counts as idle (``lease.activity.judge``) or how a backend samples.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from compute.allocation.lease.activity import Activity, IdleThresholds, judge
from compute.allocation.lease.backend import BackendError, MeasuresActivity
from compute.allocation.lease.store import StoredLease
from compute.allocation.lifecycle.manager import AllocationManager, idle_stop_s
from compute.protocol import LeaseIdle, RequestFailed

log = logging.getLogger(__name__)

SAMPLE_TIMEOUT_S = 60.0
IDLE_INTERVAL_S = 60.0


@dataclass
class _Watched:
    sample: Activity
    sampled_at: float  # wall time of the sample
    idle_since: float | None = None


class IdleWatch:
    """Samples leases with an idle stop and ends those idle for their whole window."""

    def __init__(
        self,
        manager: AllocationManager,
        thresholds: IdleThresholds | None = None,
        clock: Callable[[], float] = time.time,
        sample_timeout_s: float = SAMPLE_TIMEOUT_S,
    ) -> None:
        self.manager = manager
        self.thresholds = thresholds or IdleThresholds()
        self._clock = clock
        self.sample_timeout_s = sample_timeout_s
        self._watched: dict[str, _Watched] = {}

    async def check_once(self) -> list[str]:
        """One pass over the active leases with an idle stop; returns the ids it ended."""
        backend = self.manager.backend
        if not isinstance(backend, MeasuresActivity):
            return []
        leases = [s for s in await asyncio.to_thread(self.manager.store.active) if idle_stop_s(s)]
        stopped = []
        for lease in leases:
            if await self._check(backend, lease):
                stopped.append(lease.lease_id)
        for gone in set(self._watched) - {s.lease_id for s in leases}:
            del self._watched[gone]
            self.manager.note_idle(gone, None)
        return stopped

    async def _check(self, backend: MeasuresActivity, lease: StoredLease) -> bool:
        lease_id, stop_after = lease.lease_id, idle_stop_s(lease) or 0
        now = self._clock()
        try:
            sample = await asyncio.wait_for(backend.activity(lease.record), self.sample_timeout_s)
        except (BackendError, RequestFailed, asyncio.TimeoutError, OSError) as exc:
            self._watched.pop(lease_id, None)  # unknown is busy: the run starts over
            reason = str(exc) or type(exc).__name__
            log.info("lease=%s activity not measured (%s); idle clock reset", lease_id, reason)
            self.manager.note_idle(
                lease_id, LeaseIdle(stop_after_s=stop_after, checked_at=now, seen=reason[:200])
            )
            return False
        before = self._watched.get(lease_id)
        watched = _Watched(sample, now)
        if before is None:
            seen = "first sample"
        else:
            idle, seen = judge(before.sample, sample, self.thresholds)
            watched.idle_since = (before.idle_since or before.sampled_at) if idle else None
        self._watched[lease_id] = watched
        idle_for = now - watched.idle_since if watched.idle_since is not None else 0.0
        self.manager.note_idle(
            lease_id,
            LeaseIdle(stop_after_s=stop_after, idle_since=watched.idle_since, checked_at=now, seen=seen),
        )
        if watched.idle_since is None or idle_for < stop_after:
            return False
        return await self.manager.stop_idle(lease_id, idle_for)


__all__ = ["IDLE_INTERVAL_S", "IdleWatch"]
