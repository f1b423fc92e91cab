"""The rental backend interface (versioned) that a miner may swap.

Defines only the protocol and its errors; implementations live in their own modules
(``docker.backend``, ``embedded.backend``) and are chosen by name from ``BACKENDS``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from compute.allocation.lease.activity import Activity
from compute.allocation.lease.records import Endpoint, LeaseRecord
from compute.protocol import GpuSpec

BACKEND_API_VERSION = 1


class BackendError(Exception):
    """A backend could not carry out an operation on a lease's resources."""


@runtime_checkable
class Backend(Protocol):
    name: str

    async def start(self, lease: LeaseRecord) -> Endpoint: ...

    async def stop(self, lease_id: str) -> None: ...  # idempotent

    async def restart(self, lease_id: str) -> None: ...

    async def set_authorized_key(self, lease_id: str, public_key: str) -> None: ...

    async def running(self) -> set[str]: ...  # lease ids with live resources


@runtime_checkable
class MeasuresActivity(Protocol):
    """A backend that can sample a lease for the idle watch (optional: without it, a miner
    refuses leases that ask for an idle stop)."""

    async def activity(self, lease: LeaseRecord) -> Activity: ...


class Placement(Protocol):
    """Where a lease's GPUs may live when the miner has several hosts (``hosts.backend``)."""

    def usable(self, gpus: list[GpuSpec]) -> list[GpuSpec]: ...  # those on a host that is up

    def largest_host(self) -> int: ...  # GPUs of the biggest host (a lease never spans hosts)

    def place(
        self, candidates: list[GpuSpec], count: int, want: str | None
    ) -> tuple[tuple[int, ...], str]: ...  # GPUs on one up host, and its name; BackendError if none
