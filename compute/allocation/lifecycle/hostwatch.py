"""The miner's host watch step: check every host of a multi-host miner and recover the ones back.

It sits above both the multi-host backend and the manager, so neither needs to know the other.
"""

from __future__ import annotations

import logging

from compute.allocation.hosts.backend import MultiHostBackend
from compute.allocation.lifecycle.manager import AllocationManager

log = logging.getLogger(__name__)


async def check_and_recover(backend: MultiHostBackend, manager: AllocationManager) -> dict[str, bool]:
    """One host watch step: check every host, refresh the manager's GPU list, and reconcile when a
    host came back (its stopped lease containers are started again, orphans removed)."""
    before = set(backend.up_hosts())
    status = await backend.check_hosts()
    manager.gpus = sorted(backend.gpu_specs(), key=lambda g: g.index)
    back = sorted(name for name, up in status.items() if up and name not in before)
    if back:
        log.info("host(s) %s back: reconciling their leases", ", ".join(back))
        await manager.reconcile()
    return status


__all__ = ["check_and_recover"]
