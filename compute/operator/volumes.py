"""A renter's persistent volumes: ``--volume NAME[:SIZE_GB]``, ``register.py volumes`` and ``volume-delete``.

Volumes live on one miner (names are per renter hotkey there). ``volumes`` asks the miners this
renter has leased from (its book), or one named miner, for the renter's own volumes; an offline or
old miner is listed with its error. ``miner_with_volume`` finds where a named volume was used, so
that ``allocate --volume NAME`` goes back to the miner holding the data.

Deliberately not here: printing (``output_volumes``) or allocating (``service``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from compute.operator.book import LeaseBook
from compute.operator.errors import UsageError
from compute.operator.rpc import Client, MinerRef, ask_all, call
from compute.protocol import (
    DeleteVolumeRequest,
    ListVolumesRequest,
    VolumeInfo,
    VolumeRequest,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MinerVolumes:
    """The renter's volumes on one miner, or why it could not say."""

    uid: int | None
    hotkey: str
    volumes: tuple[VolumeInfo, ...] = ()
    error: str | None = None


def parse_volume(text: str) -> VolumeRequest:
    """``NAME`` or ``NAME:SIZE_GB`` -> a validated request; UsageError with the rule otherwise."""
    name, sep, size = text.strip().partition(":")
    try:
        if sep and not size:
            raise ValueError("no size after ':'")
        return VolumeRequest(name=name, size_gb=float(size) if sep else None)
    except (ValueError, ValidationError):
        raise UsageError(
            f"--volume {text!r}: expected NAME[:SIZE_GB], NAME of a-z 0-9 _ - (at most 32, starting with "
            "a letter or digit), SIZE_GB between 0.1 and 65536"
        ) from None


def volume_name(text: str) -> str:
    return parse_volume(text).name


def miner_with_volume(book: LeaseBook, owner: str, name: str) -> MinerRef | None:
    """The miner of the renter's latest lease that used volume ``name`` (None: never used)."""
    for entry in book.entries(owner, include_ended=True):
        volume = entry.requirements.get("volume") or {}
        if volume.get("name") == name:
            return MinerRef(entry.miner_hotkey, entry.endpoint, entry.miner_uid)
    return None


def book_miners(book: LeaseBook, owner: str) -> list[MinerRef]:
    """Each miner the renter has leased from, once."""
    seen: dict[str, MinerRef] = {}
    for entry in book.entries(owner, include_ended=True):
        seen.setdefault(entry.miner_hotkey, MinerRef(entry.miner_hotkey, entry.endpoint, entry.miner_uid))
    return list(seen.values())


async def list_volumes(
    client: Client, miners: Sequence[MinerRef], concurrency: int = 32, deadline_s: float = 30.0
) -> list[MinerVolumes]:
    answers = await ask_all(client, miners, ListVolumesRequest(), concurrency, deadline_s)
    return [
        MinerVolumes(a.miner.uid, a.miner.hotkey, tuple(a.reply.volumes) if a.error is None else (), a.error)
        for a in answers  # a reply is the route's parsed ListVolumesResponse
    ]


async def delete_volume(client: Client, miner: MinerRef, name: str) -> None:
    await call(client, miner, DeleteVolumeRequest(name=name))
    logger.info("volume deleted name=%s miner=%s", name, miner.hotkey)


__all__ = [
    "MinerVolumes",
    "book_miners",
    "delete_volume",
    "list_volumes",
    "miner_with_volume",
    "parse_volume",
    "volume_name",
]
