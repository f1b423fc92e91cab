"""What a lease container looks like to Docker: create arguments, labels, and whose it is.

Pure functions used by :mod:`compute.allocation.docker.backend`: the ``containers.create``
keyword arguments for a lease (limits, ports, GPUs, labels), the shared-memory size, the
``compute.*`` labels, and :func:`partition_containers`, which splits the engine's managed
containers into this miner's lease ids, pre-``compute.miner`` ("legacy") containers and other
miners' containers. Several miners (or a benchmark, or tests) may share one Docker engine: a
miner only ever adopts, lists or removes containers labelled ``compute.miner=<its miner_id>``.

It deliberately does no I/O: no Docker calls, no key generation, no port probing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docker.errors import APIError
from docker.types import DeviceRequest, LogConfig

from compute.allocation.lease.records import LeaseRecord
from compute.protocol import VOLUME_MOUNT_PATH

SSHD_COMMAND = ["/bin/sh", "-c", "mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e"]
# Ends every SSH session (and what runs under it) while the listening sshd keeps accepting: kills
# the whole process tree below the listener named in /run/sshd.pid. Plain sh and /proc only, so it
# works in any image. Exit 3: no listener pid to work from.
END_SESSIONS_SCRIPT = (
    'L=$(cat /run/sshd.pid 2>/dev/null); [ -n "$L" ] || exit 3; '
    "tree() { for s in /proc/[0-9]*/status; do p=; pp=; "
    'while read -r k v; do case "$k" in Pid:) p=$v;; PPid:) pp=$v; break;; esac; done < "$s"; '
    '[ "$pp" = "$1" ] && [ -n "$p" ] && { echo "$p"; tree "$p"; }; done 2>/dev/null; }; '
    'kids=$(tree "$L"); [ -z "$kids" ] || kill -KILL $kids 2>/dev/null; exit 0'
)
EXTRA_PORT_BASE = 8000  # extra container ports are 8000, 8001, ...
OVERLAY_PORT = 51820  # a cluster member's UDP port for the renter's WireGuard overlay (docs/cluster.md)
TUN_DEVICE = "/dev/net/tun"
LABEL_MANAGED = "compute.managed"
LABEL_MINER = "compute.miner"
LABEL_LEASE_ID = "compute.lease_id"
LABEL_HOST_KEY = "compute.host_key"
_QUOTA_DRIVERS = {"btrfs", "zfs", "devicemapper", "windowsfilter"}
_MINER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


@dataclass(frozen=True)
class ContainerOptions:
    """The backend-wide settings a lease container is created with."""

    image: str
    host: str
    miner_id: str
    pids_limit: int
    network: str | None = None
    host_cpus: tuple[int, ...] = ()  # cores leases may be pinned to (the miner's CPU affinity)
    lxcfs_root: str | None = None  # LXCFS mount point on the host, when it runs (see lxcfs_root)
    overlay_network: str | None = None  # where overlay (cluster) leases go; None: ``network``


def validate_miner_id(miner_id: str) -> str:
    """``miner_id`` if it is a usable label value (an ss58 hotkey, a name), else ValueError."""
    if not isinstance(miner_id, str) or not _MINER_ID.fullmatch(miner_id):
        raise ValueError(f"miner_id {miner_id!r} must match {_MINER_ID.pattern}")
    return miner_id


def shm_mb(lease: LeaseRecord) -> int:
    """Shared memory for a lease: as asked, else 1/8 of its memory (min 64 MiB), never above its memory."""
    wanted = lease.shm_mb if lease.shm_mb > 0 else max(64, lease.memory_mb // 8)
    return min(wanted, lease.memory_mb)


def lease_labels(lease: LeaseRecord, host_key_line: str, miner_id: str) -> dict[str, str]:
    return {
        LABEL_MANAGED: "1",
        LABEL_MINER: miner_id,
        LABEL_LEASE_ID: lease.lease_id,
        "compute.owner": lease.owner_hotkey,
        "compute.purpose": lease.purpose,
        "compute.expires_at": f"{lease.expires_at:.3f}",
        LABEL_HOST_KEY: host_key_line,
    }


def cpuset_for(lease_id: str, cpu_count: int, host_cpus: Sequence[int]) -> str:
    """The cores a lease is pinned to, so ``nproc`` inside shows its CPU count ("" = no pinning).

    The CFS quota (``nano_cpus``) still caps what the lease uses; pinning makes the count visible
    to the renter's tools (``nproc``, torch's thread pools). Leases start at a core derived from
    their id, so concurrent leases spread over the host; sets may overlap, the quotas do not add up
    beyond what the manager admitted.
    """
    cores = sorted(set(host_cpus))
    if not cores:
        return ""
    count = max(1, min(cpu_count, len(cores)))
    start = int.from_bytes(hashlib.sha256(lease_id.encode()).digest()[:4], "little") % len(cores)
    return ",".join(str(core) for core in sorted(cores[(start + i) % len(cores)] for i in range(count)))


def container_kwargs(
    options: ContainerOptions,
    lease: LeaseRecord,
    *,
    name: str,
    host_ports: list[int],
    host_key_line: str,
    device_ids: list[str],
    disk_limit: bool,
    volume: str | None = None,
) -> dict[str, Any]:
    """Arguments for ``containers.create``: limits, labels, port map, GPUs, the persistent volume.

    ``host_ports``: SSH's, then one per extra port, then (an overlay lease) the overlay's UDP one."""
    ports = {"22/tcp": (options.host, host_ports[0])}
    for offset, host_port in enumerate(host_ports[1 : 1 + lease.extra_ports]):
        ports[f"{EXTRA_PORT_BASE + offset}/tcp"] = (options.host, host_port)
    if lease.overlay:
        ports[f"{OVERLAY_PORT}/udp"] = (options.host, host_ports[1 + lease.extra_ports])
    memory = f"{lease.memory_mb}m"
    kwargs: dict[str, Any] = {
        "image": options.image,
        "name": name,
        "command": SSHD_COMMAND,
        "detach": True,
        "hostname": f"lease-{lease.lease_id[:40]}",
        "labels": lease_labels(lease, host_key_line, options.miner_id),
        "init": True,
        "nano_cpus": lease.cpu_count * 1_000_000_000,
        "mem_limit": memory,
        "memswap_limit": memory,
        "shm_size": f"{shm_mb(lease)}m",
        "pids_limit": options.pids_limit,
        "ports": ports,
        "cap_drop": ["NET_RAW", "MKNOD"],
        "security_opt": ["no-new-privileges:true"],
        "restart_policy": {"Name": "unless-stopped"},
        "log_config": LogConfig(type="json-file", config={"max-size": "10m", "max-file": "3"}),
        "environment": {"NVIDIA_VISIBLE_DEVICES": "void"},
    }
    if device_ids:
        kwargs["device_requests"] = [DeviceRequest(device_ids=device_ids, capabilities=[["gpu"]])]
        kwargs["environment"] = {"NVIDIA_VISIBLE_DEVICES": ",".join(device_ids)}
    cpuset = cpuset_for(lease.lease_id, lease.cpu_count, options.host_cpus)
    if cpuset:
        kwargs["cpuset_cpus"] = cpuset
    if lease.overlay:  # its own network namespace only: the host's interfaces are not in it
        kwargs["devices"] = [f"{TUN_DEVICE}:{TUN_DEVICE}:rwm"]
        kwargs["cap_add"] = ["NET_ADMIN"]
    network = options.overlay_network if lease.overlay and options.overlay_network else options.network
    if network:
        kwargs["network"] = network
    if lease.disk_gb > 0 and disk_limit:
        kwargs["storage_opt"] = {"size": f"{lease.disk_gb}G"}
    if options.lxcfs_root:
        kwargs["volumes"] = lxcfs_volumes(options.lxcfs_root)
    if volume:
        kwargs["volumes"] = {**kwargs.get("volumes", {}), volume: {"bind": VOLUME_MOUNT_PATH, "mode": "rw"}}
        kwargs["labels"]["compute.volume"] = volume
    return kwargs


LXCFS_ROOT = "/var/lib/lxcfs"
LXCFS_PROC_FILES = ("cpuinfo", "diskstats", "loadavg", "meminfo", "stat", "swaps", "uptime")


def lxcfs_root(root: str = LXCFS_ROOT) -> str | None:
    """``root`` when LXCFS serves its per-container /proc views there (else None).

    Without LXCFS, ``free``, ``top`` and ``/proc/meminfo`` inside a lease show the host's totals
    (the cgroup limits still apply); with it they show the lease's own memory and CPUs."""
    return root if Path(root, "proc", "meminfo").is_file() else None


def lxcfs_volumes(root: str | None) -> dict[str, dict[str, str]]:
    """Read-only bind mounts of LXCFS's /proc files over the container's (empty without LXCFS)."""
    if not root:
        return {}
    return {f"{root}/proc/{name}": {"bind": f"/proc/{name}", "mode": "ro"} for name in LXCFS_PROC_FILES}


@dataclass(frozen=True)
class Partition:
    """Managed containers seen on the engine, split by owner."""

    ours: frozenset[str]  # lease ids labelled with this miner's id
    legacy: tuple[str, ...]  # container names without a compute.miner label (made before it existed)
    others: int  # containers of other miners


def partition_containers(summaries: Iterable[Mapping[str, Any]], miner_id: str) -> Partition:
    """Split ``containers.list(sparse=True)`` attrs of managed containers by their ``compute.miner``."""
    ours: set[str] = set()
    legacy: list[str] = []
    others = 0
    for summary in summaries:
        labels = summary.get("Labels") or {}
        owner = labels.get(LABEL_MINER)
        if owner is None:
            names = summary.get("Names") or [str(summary.get("Id", "?"))[:12]]
            legacy.append(str(names[0]).lstrip("/"))
        elif owner != miner_id:
            others += 1
        elif labels.get(LABEL_LEASE_ID):
            ours.add(labels[LABEL_LEASE_ID])
    return Partition(frozenset(ours), tuple(sorted(legacy)), others)


def owner_of(labels: Mapping[str, str] | None) -> str | None:
    """The ``compute.miner`` of a container's labels; None for a legacy (pre-label) container."""
    return (labels or {}).get(LABEL_MINER)


def disk_quota_supported(info: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether the engine (``client.info()``) can enforce ``storage_opt size``, and its driver/fs."""
    driver = info.get("Driver", "")
    status = dict(tuple(pair) for pair in info.get("DriverStatus") or [] if len(pair) == 2)
    backing = status.get("Backing Filesystem", "?")
    supported = driver in _QUOTA_DRIVERS or (driver == "overlay2" and backing == "xfs")
    return supported, f"{driver} on {backing}"


def port_conflict(exc: APIError) -> bool:
    """True when ``exc`` says a host port was taken between choosing and binding it."""
    message = str(exc.explanation or exc).lower()
    return "port is already allocated" in message or "address already in use" in message


def published_ports(attrs: Mapping[str, Any], protocol: str = "tcp") -> dict[int, int]:
    """Container port -> host port of one ``protocol`` from a container's inspect ``attrs``
    (``HostConfig.PortBindings``)."""
    ports: dict[int, int] = {}
    for port_spec, bindings in ((attrs.get("HostConfig") or {}).get("PortBindings") or {}).items():
        port, _, proto = port_spec.partition("/")
        if bindings and (proto or "tcp") == protocol:
            ports[int(port)] = int(bindings[0]["HostPort"])
    return ports
