"""Lease values shared by the allocation manager, its store and the rental backends.

Frozen dataclasses only: no I/O, no validation of wire input (that happens in
``compute.protocol`` at the trust boundary before a record is built).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Purpose = Literal["rental", "validation", "beside"]


@dataclass(frozen=True)
class LeaseRecord:
    """One lease as the miner stores it: who owns it, what it may use, until when."""

    lease_id: str
    owner_hotkey: str
    purpose: Purpose
    gpus: tuple[int, ...]
    cpu_count: int
    memory_mb: int
    disk_gb: int
    shm_mb: int
    extra_ports: int
    ssh_public_key: str
    created_at: float
    expires_at: float
    template: str | None = None  # the base-image template asked for (None: the miner's default)
    volume: str | None = None  # the owner's persistent volume it mounts (None: none)
    host: str | None = None  # the hosts-file host it runs on (None: the miner's own engine)
    overlay: bool = False  # a cluster member: TUN, NET_ADMIN and a published UDP port (docs/cluster.md)


@dataclass(frozen=True)
class Endpoint:
    """How a renter reaches a started lease."""

    host: str
    ssh_port: int
    username: str
    host_key: str  # OpenSSH public host key line, for pinning
    ports: dict[int, int] = field(default_factory=dict)  # container port -> host port
    udp_ports: dict[int, int] = field(default_factory=dict)  # container UDP port -> host port (overlay)


@dataclass(frozen=True)
class Receipt:
    """The renter's allocate request exactly as signed (btauth/1): kept so validators can verify it."""

    path: str
    body: str
    headers: dict[str, str]
