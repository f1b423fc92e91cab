"""Chain values and errors shared by every package that reads or writes the chain.

Plain frozen dataclasses (no SDK types leak out) and a small error hierarchy a
caller can branch on. Nothing here talks to a chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class ChainError(Exception):
    """Root of chain failures (a rejected extrinsic, an unexpected reply, bad input)."""


class NotRegistered(ChainError):
    """The hotkey is not registered on the subnet."""


class RateLimited(ChainError):
    """The chain refuses the write until more blocks pass (e.g. the weights rate limit)."""


class ChainUnavailable(ChainError):
    """The chain endpoint cannot be reached or did not answer in time."""


@dataclass(frozen=True)
class NeuronInfo:
    uid: int
    hotkey: str
    coldkey: str
    stake: float  # total stake in TAO (float)
    validator_permit: bool
    axon: str | None  # "ip:port" or None when not serving
    active: bool
    last_update: int


@dataclass(frozen=True)
class MetagraphSnapshot:
    netuid: int
    block: int
    neurons: tuple[NeuronInfo, ...]

    def by_hotkey(self) -> dict[str, NeuronInfo]:
        return {n.hotkey: n for n in self.neurons}

    def uid_of(self, hotkey: str) -> int | None:
        for neuron in self.neurons:
            if neuron.hotkey == hotkey:
                return neuron.uid
        return None


class Chain(Protocol):
    """Sync chain access; call it from async code through ``asyncio.to_thread``."""

    netuid: int

    def block(self) -> int: ...
    def metagraph(self) -> MetagraphSnapshot: ...
    def is_registered(self, hotkey: str) -> bool: ...
    def serve(self, wallet: Any, ip: str, port: int) -> None: ...
    def set_weights(self, wallet: Any, weights: dict[int, float], version_key: int) -> None: ...
    def weights(self, uid: int) -> dict[int, float]: ...
    def close(self) -> None: ...
