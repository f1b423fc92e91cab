"""Samples of an embedded lease for the idle watch: its processes' CPU and its GPUs' use.

A sandboxed lease (the miner serves anyone but the local demo) runs every command as its own
unprivileged uid, so its processes are exactly that uid's: nothing it does (clearing its
environment, daemonising) takes a process out of the count. On the local demo leases run as the
miner's own user and are found by the ``LEASE_ID`` variable the backend puts in every lease
environment; a process that drops it escapes the count there. CPU is user + system time plus that
of waited-for children; a process that exits takes its time with it (the sum then goes down, which
the idle judge reads as activity). The Docker backend reads cgroup counters instead.
"""

from __future__ import annotations

import os
import time

import psutil

from compute.allocation.lease.activity import Activity
from compute.specs import gpu_busy_percent


def lease_cpu_seconds(lease_id: str, uid: int | None = None) -> float:
    """CPU seconds of the lease's live processes: those of its own ``uid`` (sandboxed), else the
    miner's own processes that carry its ``LEASE_ID``."""
    mine = os.getuid()
    total = 0.0
    for proc in psutil.process_iter(["uids"]):
        try:
            owner = proc.info["uids"].real if proc.info["uids"] is not None else None
            if uid is not None:
                if owner != uid:
                    continue
            elif owner != mine or proc.environ().get("LEASE_ID") != lease_id:
                continue
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except (psutil.Error, OSError):
            continue
    return total


def sample_lease(lease_id: str, gpus: tuple[int, ...], sessions: int, uid: int | None = None) -> Activity:
    """One sample (blocking: walks the process table); ``uid``: the lease's own, when sandboxed."""
    cpu = lease_cpu_seconds(lease_id, uid)
    gpu = gpu_busy_percent(gpus) if gpus else None
    return Activity(time.monotonic(), cpu, None, sessions, gpu, len(gpus))


__all__ = ["lease_cpu_seconds", "sample_lease"]
