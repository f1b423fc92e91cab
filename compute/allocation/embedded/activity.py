"""Samples of an embedded lease for the idle watch: its processes' CPU and its GPUs' use.

Embedded leases run as the miner's own user, so their processes are found by the ``LEASE_ID``
variable the backend puts in every lease environment; CPU is their user + system time plus that of
their waited-for children. A process that drops the variable (or daemonises with a clean
environment) escapes the count, and a process that exits takes its time with it (the sum then
goes down, which the idle judge reads as activity). Best effort, like every limit of this backend
(the demo and machines without Docker); the Docker backend reads cgroup counters instead.
"""

from __future__ import annotations

import os
import time

import psutil

from compute.allocation.lease.activity import Activity
from compute.specs import gpu_busy_percent


def lease_cpu_seconds(lease_id: str) -> float:
    total = 0.0
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.info["uids"] is None or proc.info["uids"].real != os.getuid():
                continue
            if proc.environ().get("LEASE_ID") != lease_id:
                continue
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except (psutil.Error, OSError):
            continue
    return total


def sample_lease(lease_id: str, gpus: tuple[int, ...], sessions: int) -> Activity:
    """One sample (blocking: walks the process table)."""
    cpu = lease_cpu_seconds(lease_id)
    gpu = gpu_busy_percent(gpus) if gpus else None
    return Activity(time.monotonic(), cpu, None, sessions, gpu, len(gpus))


__all__ = ["lease_cpu_seconds", "sample_lease"]
