"""Samples of a lease container for the idle watch, read by the miner from the Docker engine.

CPU seconds and network bytes are the container's cgroup and interface counters from the
engine's stats (host-side, cumulative, so short commands between samples still count); SSH
sessions are the container's ``sshd: USER@...`` session processes in the engine's process table
(``docker top``: host-side ``ps`` of the container's cgroup); GPU utilisation is what the NVIDIA
driver's ``nvidia-smi`` prints inside the container, which sees exactly the lease's GPUs (a renter
could only make its own lease look idle there). Any reading that fails is None: unknown, busy.

Blocking Docker SDK calls: run ``sample`` in a thread.
"""

from __future__ import annotations

import re
import time
from typing import Any

from docker.errors import DockerException

from compute.allocation.lease.activity import Activity

_SESSION = re.compile(r"^sshd(?:-session)?: \S+@\S+")  # "sshd: root@notty", "sshd-session: root@pts/0"
GPU_QUERY = ["timeout", "10", "nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]


def cpu_seconds(stats: dict[str, Any]) -> float | None:
    try:
        return float(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9
    except (KeyError, TypeError, ValueError):
        return None


def network_bytes(stats: dict[str, Any]) -> int | None:
    networks = stats.get("networks")
    if not isinstance(networks, dict) or not networks:
        return None
    try:
        return sum(int(n.get("rx_bytes", 0)) + int(n.get("tx_bytes", 0)) for n in networks.values())
    except (AttributeError, TypeError, ValueError):
        return None


def ssh_sessions(top: dict[str, Any]) -> int:
    titles = top.get("Titles") or []
    column = titles.index("CMD") if "CMD" in titles else len(titles) - 1
    return sum(1 for row in top.get("Processes") or [] if _SESSION.match(str(row[column])))


def gpu_percent(output: bytes) -> float | None:
    """Highest value of nvidia-smi's ``utilization.gpu`` lines; None when nothing parses."""
    values = []
    for line in output.decode("ascii", "replace").splitlines():
        try:
            values.append(float(line.strip()))
        except ValueError:
            continue
    return max(values) if values else None


def sample(container: Any, gpus: int) -> Activity:
    """One sample of ``container`` (a docker SDK container of a lease holding ``gpus`` GPUs)."""
    stats = container.stats(stream=False, one_shot=True)
    at = time.monotonic()
    top = container.top()
    gpu = None
    if gpus:
        try:
            result = container.exec_run(GPU_QUERY, user="root")
            gpu = gpu_percent(result.output) if result.exit_code == 0 else None
        except DockerException:
            gpu = None
    return Activity(at, cpu_seconds(stats), network_bytes(stats), ssh_sessions(top), gpu, gpus)


__all__ = ["GPU_QUERY", "cpu_seconds", "gpu_percent", "network_bytes", "sample", "ssh_sessions"]
