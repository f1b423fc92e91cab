"""The disk watch: a Docker lease that wrote more than its ``disk_gb`` is stopped, where sizes are advisory.

The Docker backend holds a lease's disk size in the kernel (``docker.diskcap``: the storage
driver's quota, or a lease disk as the container's writable layer) and then this watch has nothing
to do. Where neither works and the operator accepted advisory sizes (``--miner.disk_cap_advisory``),
it measures every lease container's own layer (``SizeRw``) each ``interval`` and ends a lease over
its size (plus ``slack``) as ``expired``: the renter's container is stopped before it can take the
disk other tenants and the miner need, as a watched volume is refused over its size. It cannot see
a file the tenant deleted but keeps open (the layer does not count it): that is why advisory sizes
are the operator's explicit choice.

What it deliberately does not do: look inside volumes (their own quota), or stop a lease whose
size it could not measure (an engine that does not answer is the host watch's business).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from compute.allocation.lifecycle.manager import AllocationManager

log = logging.getLogger(__name__)

GIB = 1024**3
SLACK = 0.05  # a lease may go this share over its size before it is stopped (measurement rounding)


class MeasuresDisk(Protocol):
    @property
    def disk_limit_enforced(self) -> bool | None: ...

    async def disk_usage(self) -> dict[str, int]: ...


class DiskWatch:
    def __init__(self, manager: AllocationManager, slack: float = SLACK) -> None:
        self.manager, self.slack = manager, slack
        self.stopped: list[str] = []  # lease ids this watch ended (for tests and the log)

    async def check_once(self) -> list[str]:
        """One pass: the lease ids ended for writing past their size."""
        backend = self.manager.backend
        if not hasattr(backend, "disk_usage") or getattr(backend, "disk_limit_enforced", None) is True:
            return []
        sizes = await backend.disk_usage()
        ended = []
        for lease in await asyncio.to_thread(self.manager.store.active):
            used = sizes.get(lease.lease_id)
            cap = lease.record.disk_gb * GIB * (1 + self.slack)
            if used is None or used <= cap:
                continue
            log.warning(
                "lease=%s owner=%s wrote %.2f GB to its container, over its %d GB: stopped",
                lease.lease_id,
                lease.record.owner_hotkey,
                used / GIB,
                lease.record.disk_gb,
            )
            if await self.manager.stop_over_disk(lease.lease_id):
                ended.append(lease.lease_id)
        self.stopped += ended
        return ended


__all__ = ["DiskWatch", "MeasuresDisk"]
