"""Cheating miners for the demo and the tests: the two frauds issue 12 is about, played for real.

- :class:`RefusingManager`: answers every GPU lease with ``no_capacity`` ("rented") while no renter
  holds anything, the cheap way to collect a rental bonus without serving renters or validators.
- :class:`OneBoxBackend`: one machine behind several hotkeys. Every lease it hands out, for every
  hotkey configured with the same box key, is the same box: one SSH host key (as one physical
  machine with one sshd has).

These are test doubles built from the public backend and manager interfaces, the way a cheater
would build them; nothing in the miner uses them.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import asyncssh

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseRecord, Receipt
from compute.protocol import AllocateRequest, ErrorCode, LeaseInfo, RequestFailed


class RefusingManager(AllocationManager):
    """Claims every GPU is rented; CPU leases (the validator's liveness check) still work."""

    async def allocate(
        self, owner_hotkey: str, request: AllocateRequest, receipt: Receipt | None = None
    ) -> LeaseInfo:
        if request.requirements.gpu_count > 0:
            raise RequestFailed(ErrorCode.NO_CAPACITY, "all GPUs are rented", 409)
        return await super().allocate(owner_hotkey, request, receipt)


def box_key(path: Path) -> asyncssh.SSHKey:
    """The box's one host key, created on first use (shared by every hotkey pointing at the box)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(asyncssh.generate_private_key("ssh-ed25519").export_private_key("openssh"))
    return asyncssh.read_private_key(path)


class OneBoxBackend(EmbeddedBackend):
    """Embedded leases that all present the box's host key."""

    def __init__(self, data_dir: str | Path, box_key_path: Path, **kwargs: Any) -> None:
        super().__init__(data_dir, **kwargs)
        self.box_key_path = box_key_path

    def _prepare(self, lease: LeaseRecord) -> Any:
        state = super()._prepare(lease)
        key = box_key(self.box_key_path)
        line = " ".join(key.export_public_key("openssh").decode("ascii").split()[:2])
        return dataclasses.replace(state, host_key=key, host_key_line=line)


__all__ = ["OneBoxBackend", "RefusingManager", "box_key"]
