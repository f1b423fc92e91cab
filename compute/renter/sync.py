"""The synchronous SDK: the async one run on a private event loop in a background thread.

``Renter`` and ``Lease`` mirror ``AsyncRenter`` and ``AsyncLease`` method for method, for scripts
and notebooks that do not run an event loop (and for those that do: the SDK's loop is its own).
Ctrl-C while a call waits cancels that call on the SDK's loop; a cancelled allocation is finished
and released there (``AsyncRenter.allocate``), and ``close`` (``with`` exit, or interpreter exit)
waits for such clean-ups before stopping the loop, so an interrupt never leaves a lease behind.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import weakref
from collections.abc import Awaitable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from compute.operator import Machine, MinerRef, RunResult
from compute.operator.cover import Cover
from compute.operator.shell import MAX_CAPTURE_BYTES, Sink
from compute.protocol import LeaseIdle
from compute.renter.client import ALLOCATE_GRACE_S, AsyncRenter, release_quietly
from compute.renter.cluster import AsyncCluster, release_cluster_quietly
from compute.renter.errors import ReleaseFailed
from compute.renter.lease import IDLE_TIMEOUT_S, AsyncLease

T = TypeVar("T")
logger = logging.getLogger(__name__)
DRAIN_S = ALLOCATE_GRACE_S + 30.0  # clean-ups (late releases) allowed to finish at close


class _Loop:
    """An event loop running forever in a daemon thread; ``run`` blocks on one coroutine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="compute-renter", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # Ctrl-C (or any error here): the coroutine is cancelled on the loop
            raise

    def drain(self) -> None:
        """Wait (bounded) for the loop's other tasks: late releases of cancelled allocations."""
        if not self.loop.is_running():
            return
        drained = asyncio.run_coroutine_threadsafe(_drain(DRAIN_S), self.loop)
        try:
            drained.result(DRAIN_S + 5)
        except Exception as exc:  # noqa: BLE001 - closing: log, never raise
            logger.warning("renter loop did not drain: %r", exc)

    def stop(self) -> None:
        if not self.loop.is_running():
            return
        self.drain()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.loop.is_running():
            self.loop.close()


async def _drain(timeout: float) -> None:
    """Wait for every other task on this loop (late releases of cancelled allocations)."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if others:
        await asyncio.wait(others, timeout=timeout)


class Renter:
    """``with Renter(wallet_name=..., network=...) as renter:`` (``AsyncRenter``'s arguments)."""

    def __init__(self, **kwargs: Any) -> None:
        self._async = AsyncRenter(**kwargs)
        self._loop = _Loop()
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_at_exit, self._loop)
        atexit.register(self._finalizer)

    def _run(self, awaitable: Awaitable[T]) -> T:
        async def call() -> T:
            return await awaitable

        return self._loop.run(call())

    def open(self) -> Renter:
        self._run(self._async.open())
        return self

    def close(self) -> None:
        """Close the client and the loop (after pending clean-ups); leases keep running."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.drain()  # first the clean-ups, which still need the client
            self._run(self._async.close())
        finally:
            self._finalizer()

    def __enter__(self) -> Renter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def hotkey(self) -> str:
        return self._async.hotkey

    def machines(self, *, available_only: bool = True, **wanted: Any) -> list[Machine]:
        return self._run(self._async.machines(available_only=available_only, **wanted))

    def collateral(self, *hotkeys: str) -> dict[str, Cover]:
        """``AsyncRenter.collateral``: each miner's standing collateral and pending reclaim."""
        return self._run(self._async.collateral(*hotkeys))

    def allocate(self, **kwargs: Any) -> Lease:
        """``AsyncRenter.allocate``: rent (and by default wait for SSH); release it yourself."""
        return Lease(self, self._run(self._async.allocate(**kwargs)))

    @contextmanager
    def rent(self, **kwargs: Any) -> Iterator[Lease]:
        """``with renter.rent(gpu_count=1, ttl="1h") as lease:`` released however the block ends."""
        lease = self.allocate(**kwargs)
        try:
            yield lease
        except BaseException:
            self._run(release_quietly(lease.async_lease))
            raise
        lease.release()

    def allocate_cluster(self, **kwargs: Any) -> Cluster:
        """``AsyncRenter.allocate_cluster``: rent N nodes all or none; release them yourself."""
        return Cluster(self, self._run(self._async.allocate_cluster(**kwargs)))

    @contextmanager
    def rent_cluster(self, **kwargs: Any) -> Iterator[Cluster]:
        """``with renter.rent_cluster(nodes=2, ttl="1h") as cluster:`` every lease released at the end."""
        cluster = self.allocate_cluster(**kwargs)
        try:
            yield cluster
        except BaseException:
            self._run(release_cluster_quietly(cluster.async_cluster))
            raise
        cluster.release()

    def leases(self, *, refresh: bool = False, include_ended: bool = False) -> list[Lease]:
        found = self._run(self._async.leases(refresh=refresh, include_ended=include_ended))
        return [Lease(self, lease) for lease in found]

    def lease(self, lease_id: str) -> Lease:
        return Lease(self, self._async.lease(lease_id))


def _close_at_exit(loop: _Loop) -> None:
    loop.stop()


class Lease:
    """The synchronous ``AsyncLease``; ``with lease:`` releases it at the end of the block."""

    def __init__(self, renter: Renter, lease: AsyncLease) -> None:
        self._renter = renter
        self.async_lease = lease

    def __repr__(self) -> str:
        return repr(self.async_lease).replace("AsyncLease", "Lease", 1)

    @property
    def id(self) -> str:
        return self.async_lease.id

    @property
    def state(self) -> str:
        return self.async_lease.state

    @property
    def gpus(self) -> str:
        return self.async_lease.gpus

    @property
    def verified(self) -> bool:
        return self.async_lease.verified

    @property
    def expires_at(self) -> float:
        return self.async_lease.expires_at

    @property
    def ports(self) -> dict[int, int]:
        return self.async_lease.ports

    @property
    def miner(self) -> MinerRef:
        return self.async_lease.miner

    @property
    def idle(self) -> LeaseIdle | None:
        return self.async_lease.idle

    @property
    def price_per_hour(self) -> float | None:
        return self.async_lease.price_per_hour

    def spent(self, now: float | None = None) -> float | None:
        return self.async_lease.spent(now)

    def ssh_command(self) -> str | None:
        return self.async_lease.ssh_command()

    def wait_ssh(self, timeout: float = 180.0) -> float:
        return self._renter._run(self.async_lease.wait_ssh(timeout))

    def run(
        self,
        command: str | Sequence[str],
        *,
        check: bool = False,
        timeout: float | None = None,
        input: bytes | str | None = None,
        stdout: Sink | None = None,
        stderr: Sink | None = None,
        max_output: int = MAX_CAPTURE_BYTES,
    ) -> RunResult:
        return self._renter._run(
            self.async_lease.run(
                command,
                check=check,
                timeout=timeout,
                input=input,
                stdout=stdout,
                stderr=stderr,
                max_output=max_output,
            )
        )

    def put(
        self,
        local: str | Path | Sequence[str | Path],
        remote: str = ".",
        recursive: bool | None = None,
        idle_timeout: float = IDLE_TIMEOUT_S,
    ) -> None:
        self._renter._run(self.async_lease.put(local, remote, recursive, idle_timeout=idle_timeout))

    def get(
        self,
        remote: str | Sequence[str],
        local: str | Path = ".",
        recursive: bool = False,
        idle_timeout: float = IDLE_TIMEOUT_S,
    ) -> None:
        self._renter._run(self.async_lease.get(remote, local, recursive, idle_timeout=idle_timeout))

    def refresh(self) -> Lease:
        self._renter._run(self.async_lease.refresh())
        return self

    def extend(self, ttl: str | float | None = None, *, until: str | float | datetime | None = None) -> Lease:
        self._renter._run(self.async_lease.extend(ttl, until=until))
        return self

    def release(self) -> None:
        self._renter._run(self.async_lease.release())

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if error is None:
            self.release()
            return
        try:
            self.release()
        except ReleaseFailed as exc:
            logger.error("%s", exc.message)


class Cluster:
    """The synchronous ``AsyncCluster``: member leases by rank, their variables, run, check, release."""

    def __init__(self, renter: Renter, cluster: AsyncCluster) -> None:
        self._renter = renter
        self.async_cluster = cluster
        self.leases = [Lease(renter, lease) for lease in cluster.leases]

    def __repr__(self) -> str:
        return repr(self.async_cluster).replace("AsyncCluster", "Cluster", 1)

    @property
    def id(self) -> str:
        return self.async_cluster.id

    @property
    def master_addr(self) -> str | None:
        return self.async_cluster.master_addr

    @property
    def master_port(self) -> int | None:
        return self.async_cluster.master_port

    def env(self, rank: int) -> dict[str, str]:
        return self.async_cluster.env(rank)

    @property
    def link(self) -> dict | None:
        return self.async_cluster.link

    def run(self, command: str | Sequence[str], *, timeout: float | None = None) -> list[RunResult]:
        return self._renter._run(self.async_cluster.run(command, timeout=timeout))

    def check(self, mib: float = 64.0, **options: Any) -> dict:
        """``AsyncCluster.check``: the nodes' link proven on this process's clock."""
        return self._renter._run(self.async_cluster.check(mib, **options))

    def join_overlay(self, timeout: float | None = None) -> None:
        """``AsyncCluster.join_overlay``: an overlay cluster's members joined again."""
        self._renter._run(self.async_cluster.join_overlay(timeout))

    def release(self) -> None:
        self._renter._run(self.async_cluster.release())


__all__ = ["Cluster", "Lease", "Renter"]
