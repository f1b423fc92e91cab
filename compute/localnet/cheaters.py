"""Cheating miners for the demo and the tests, played for real through the public interfaces.

- :class:`RefusingManager`: answers every GPU lease with ``no_capacity`` ("rented") while no renter
  holds anything, the cheap way to collect a rental bonus without serving renters or validators.
- :class:`OneBoxBackend`: one machine behind several hotkeys. Every lease it hands out, for every
  hotkey configured with the same box key, is the same box: one SSH host key (as one physical
  machine with one sshd has).
- :class:`CanaryAwareManager`: serves validation leases, rentals signed by any hotkey on a
  validator's coldkey (``on_validator_coldkeys``: the metagraph lookup that finds a validator's
  operator keys), with ``by_address`` any request from an address validation leases came from
  (``with_caller_address`` notes it), and anything shaped like the old canary (a term of 15
  minutes or less, no idempotency key, a 1 GB disk register.py never asks); answers every other
  renter "no capacity". With ``refuse_all`` it refuses every renter (the comparison).

These are test doubles built from the public backend and manager interfaces, the way a cheater
would build them; nothing in the miner uses them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import asyncssh

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseRecord, Receipt
from compute.chain import MetagraphSnapshot
from compute.protocol import AllocateRequest, ErrorCode, LeaseInfo, RequestFailed

CALLER: ContextVar[str | None] = ContextVar("caller_address", default=None)


class RefusingManager(AllocationManager):
    """Claims every GPU is rented; CPU leases (the validator's liveness check) still work."""

    async def allocate(
        self, owner_hotkey: str, request: AllocateRequest, receipt: Receipt | None = None
    ) -> LeaseInfo:
        if request.requirements.gpu_count > 0:
            raise RequestFailed(ErrorCode.NO_CAPACITY, "all GPUs are rented", 409)
        return await super().allocate(owner_hotkey, request, receipt)


def looks_like_a_canary(request: AllocateRequest) -> bool:
    """The old canary's tells: 60 s term, no idempotency key, 1 GB of RAM and disk."""
    req = request.requirements
    return request.duration_s <= 900 or request.idempotency_key is None or req.disk_gb <= 1.0


def on_validator_coldkeys(metagraph: MetagraphSnapshot) -> frozenset[str]:
    """Every hotkey registered under a coldkey that holds a validator-permitted hotkey: the
    validators' own keys and whatever operator keys they registered beside them."""
    coldkeys = {n.coldkey for n in metagraph.neurons if n.validator_permit}
    return frozenset(n.hotkey for n in metagraph.neurons if n.coldkey in coldkeys)


def with_caller_address(app: Any) -> Any:
    """The miner's ASGI app, noting each request's source address for the manager (``CALLER``)."""

    async def noted(scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("client"):
            CALLER.set(scope["client"][0])
        await app(scope, receive, send)

    return noted


class CanaryAwareManager(AllocationManager):
    """Serves validators and canary-looking rentals; every other renter hears "no capacity"."""

    def __init__(
        self,
        *args: Any,
        validators: Callable[[], Collection[str]] = frozenset,
        refuse_all: bool = False,
        by_address: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.validators = validators
        self.refuse_all = refuse_all
        self.by_address = by_address
        self.validator_addresses: set[str] = set()  # where validation leases were asked from
        self.refused: list[str] = []  # the renters it turned away (owner hotkeys), for the record
        self.callers: list[tuple[str, str | None, str]] = []  # (owner, address, purpose) of each ask

    def serves(self, owner_hotkey: str, request: AllocateRequest) -> bool:
        address = CALLER.get()
        self.callers.append((owner_hotkey, address, request.purpose))
        if request.purpose == "validation":
            if address is not None:
                self.validator_addresses.add(address)
            return True
        if self.refuse_all:
            return False
        if self.by_address and address in self.validator_addresses:
            return True
        return owner_hotkey in self.validators() or looks_like_a_canary(request)

    async def allocate(
        self, owner_hotkey: str, request: AllocateRequest, receipt: Receipt | None = None
    ) -> LeaseInfo:
        if not self.serves(owner_hotkey, request):
            self.refused.append(owner_hotkey)
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


__all__ = [
    "CALLER",
    "CanaryAwareManager",
    "OneBoxBackend",
    "RefusingManager",
    "box_key",
    "looks_like_a_canary",
    "on_validator_coldkeys",
    "with_caller_address",
]
