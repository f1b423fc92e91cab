"""Several leases rented together in the async SDK: ``AsyncRenter.allocate_cluster``/``rent_cluster``.

An ``AsyncCluster`` holds the member leases in rank order (``leases[0]`` is rank 0) and the
rendezvous variables of each (``env(rank)``: ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``...; docs/cluster.md#cluster-rentals). ``run`` starts one
command on every node at once with its variables exported; ``check`` proves the nodes' link with
the renter as the judge (``compute.operator.cluster_check``), its report kept as ``link`` and in
the lease book (``register.py cluster show``); ``release`` ends every member (each tried even when
another fails). Renting is all or none: ``compute.operator.cluster`` releases
every lease made when one member fails or the call is cancelled. Nothing here prints.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Sequence

from compute.operator import RunResult
from compute.operator.cluster import Cluster, rejoin_overlay
from compute.operator.cluster_check import CheckOptions, check_cluster
from compute.operator.shell import MAX_CAPTURE_BYTES
from compute.renter.errors import ReleaseFailed
from compute.renter.lease import AsyncLease, OperatorHolder

logger = logging.getLogger(__name__)


class AsyncCluster:
    """Leases rented together (``await renter.allocate_cluster(nodes=2, ...)``)."""

    def __init__(self, renter: OperatorHolder, cluster: Cluster) -> None:
        self._renter = renter
        self.cluster = cluster
        self.leases = [AsyncLease(renter, entry) for entry in cluster.members]
        self.link: dict | None = None  # the renter's latest link proof (min_link_gbps or check)

    def __repr__(self) -> str:
        return (
            f"<AsyncCluster {self.id} {len(self.leases)} nodes master {self.master_addr}:{self.master_port}>"
        )

    @property
    def id(self) -> str:
        return self.cluster.cluster_id

    @property
    def master_addr(self) -> str | None:
        return self.cluster.master_addr

    @property
    def master_port(self) -> int | None:
        return self.cluster.rendezvous_port

    def env(self, rank: int) -> dict[str, str]:
        return self.cluster.env(rank)

    async def wait_ssh(self, timeout: float = 180.0) -> None:
        await asyncio.gather(*(lease.wait_ssh(timeout) for lease in self.leases))

    async def run(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = None,
        max_output: int = MAX_CAPTURE_BYTES,
    ) -> list[RunResult]:
        """Run ``command`` on every node at once with its variables exported; results by rank."""
        line = command if isinstance(command, str) else shlex.join(command)

        async def one(rank: int, lease: AsyncLease) -> RunResult:
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env(rank).items())
            return await lease.run(f"export {exports}; {line}", timeout=timeout, max_output=max_output)

        return list(await asyncio.gather(*(one(r, lease) for r, lease in enumerate(self.leases))))

    async def check(
        self,
        mib: float = 64.0,
        *,
        python: str = "python3",
        ifname: str | None = None,
        device: str = "auto",
        timeout: float = 120.0,
    ) -> dict:
        """The interconnect proof across every node, timed on this process's clock and verified here:
        ``{"passed", "bandwidth_gbs" (per link), "plain_gbs", "interval_s", "failures", ...}``.
        ``Refused`` when the nodes could not join (no ``python`` with torch and this package)."""
        options = CheckOptions(mib=mib, python=python, ifname=ifname, device=device, timeout_s=timeout)
        report = await check_cluster(self.cluster, options, self._renter.operator.book)
        self.link = report.payload(self.cluster)
        return self.link

    async def join_overlay(self, timeout: float | None = None) -> None:
        """Join an overlay cluster's members again (``register.py cluster join``): after a member's
        lease restarted, its interface is gone. ``OverlayFailed`` leaves every lease as it is."""
        self.cluster = await rejoin_overlay(self._renter.operator, self.cluster, timeout)
        for lease, entry in zip(self.leases, self.cluster.members, strict=True):
            lease.entry = entry

    async def release(self) -> None:
        """End every member lease (idempotent); ``ReleaseFailed`` names those never confirmed."""
        results = await asyncio.gather(*(lease.release() for lease in self.leases), return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        for error in failed:
            if not isinstance(error, ReleaseFailed):
                raise error
        if failed:
            raise ReleaseFailed("; ".join(str(e) for e in failed)) from failed[0]


async def release_cluster_quietly(cluster: AsyncCluster) -> None:
    """Release after a failure: a release that fails too is logged, the original error stays."""
    try:
        await asyncio.shield(cluster.release())
    except ReleaseFailed as exc:
        logger.error("%s", exc.message)
