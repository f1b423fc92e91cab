"""The renters' SDK: find, rent, reach and release subnet machines from Python (docs/sdk.md).

``Renter`` (synchronous) and ``AsyncRenter`` wrap the operator client behind ``register.py``
(``compute.operator``): the same miner calls, the same lease book and keys, the same pinned host
keys. ``rent`` (one machine) and ``rent_cluster`` (several, all or none) are context managers that
always release; ``Lease.run``/``put``/``get`` reach into
the lease over SSH with the host key the miner signed. Errors: ``compute.renter.errors``.
"""

from __future__ import annotations

from compute.operator import Machine, RunResult
from compute.renter.client import AsyncRenter
from compute.renter.cluster import AsyncCluster
from compute.renter.errors import (
    CommandFailed,
    CommandTimeout,
    ConfigError,
    HostKeyMismatch,
    LeaseUnavailable,
    MinerUnavailable,
    NoMachineAvailable,
    OutputTruncated,
    ReleaseFailed,
    RenterError,
    SshError,
    TransferFailed,
    TransferStalled,
)
from compute.renter.lease import AsyncLease
from compute.renter.sync import Cluster, Lease, Renter

__all__ = [
    "AsyncCluster",
    "AsyncLease",
    "AsyncRenter",
    "Cluster",
    "CommandFailed",
    "CommandTimeout",
    "ConfigError",
    "HostKeyMismatch",
    "Lease",
    "LeaseUnavailable",
    "Machine",
    "MinerUnavailable",
    "NoMachineAvailable",
    "OutputTruncated",
    "ReleaseFailed",
    "Renter",
    "RenterError",
    "RunResult",
    "SshError",
    "TransferFailed",
    "TransferStalled",
]
