"""Leases on a miner: durable store, lifecycle manager and swappable rental backends.

``BACKENDS`` maps a backend name to its factory; ``docker`` is imported lazily (it pulls the
Docker SDK), ``embedded`` is the in-process asyncssh backend for development and tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compute.allocation.docker.templates import (
    TemplateCatalog,
    TemplateError,
    UnknownTemplate,
    default_catalog,
    load_templates,
)
from compute.allocation.embedded.backend import EmbeddedBackend
from compute.allocation.lease.backend import BACKEND_API_VERSION, Backend, BackendError
from compute.allocation.lease.records import Endpoint, LeaseRecord, Receipt
from compute.allocation.lease.store import GpuConflict, LeaseStore, StoredLease, StoreError
from compute.allocation.lifecycle.health import HealthMonitor
from compute.allocation.lifecycle.idle import IdleWatch
from compute.allocation.lifecycle.manager import AllocationManager, Availability, ManagerLimits


def _docker_backend(*args: Any, **kwargs: Any) -> Backend:
    from compute.allocation.docker.backend import DockerBackend

    return DockerBackend(*args, **kwargs)


BACKENDS: dict[str, Callable[..., Backend]] = {"docker": _docker_backend, "embedded": EmbeddedBackend}


def __getattr__(name: str) -> Any:
    if name == "DockerBackend":
        from compute.allocation.docker.backend import DockerBackend

        return DockerBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BACKENDS",
    "BACKEND_API_VERSION",
    "AllocationManager",
    "Availability",
    "Backend",
    "BackendError",
    "DockerBackend",
    "EmbeddedBackend",
    "Endpoint",
    "GpuConflict",
    "LeaseRecord",
    "LeaseStore",
    "ManagerLimits",
    "Receipt",
    "StoreError",
    "StoredLease",
    "HealthMonitor",
    "IdleWatch",
    "TemplateCatalog",
    "TemplateError",
    "UnknownTemplate",
    "default_catalog",
    "load_templates",
]
