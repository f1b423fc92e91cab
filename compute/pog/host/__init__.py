"""Host proofs (CPU cores, disk; RAM is the memory proof on the host): prove or do not credit.
``probe`` runs in the worker; ``check`` on the validator, at milliseconds of CPU per miner."""

from __future__ import annotations

from .check import (
    HostPolicy,
    ProbeCheck,
    check_cpu,
    check_disk,
    cpu_request,
    disk_read_request,
    disk_write_request,
    ram_challenge,
)
from .probe import DiskProbe, probe_cpu

__all__ = [
    "DiskProbe",
    "HostPolicy",
    "ProbeCheck",
    "check_cpu",
    "check_disk",
    "cpu_request",
    "disk_read_request",
    "disk_write_request",
    "probe_cpu",
    "ram_challenge",
]
