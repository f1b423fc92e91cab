"""Chain access for the compute subnet: metagraph, serving, weights, on a live or simulated chain.

``connect(network, netuid)`` returns a :class:`Chain` (implemented by :class:`BtChain`
over ``bt.Subtensor``). ``network="sim:/path/chain.db"`` selects the SQLite-backed
simulated chain in :mod:`compute.chain.sim`, which runs the same SDK code paths.
"""

from __future__ import annotations

from .client import NAMED_NETWORKS, BtChain, connect
from .sim import SimChainState, SimSubstrate
from .types import (
    Chain,
    ChainError,
    ChainUnavailable,
    MetagraphSnapshot,
    NeuronInfo,
    NotRegistered,
    RateLimited,
)

__all__ = [
    "NAMED_NETWORKS",
    "BtChain",
    "Chain",
    "ChainError",
    "ChainUnavailable",
    "MetagraphSnapshot",
    "NeuronInfo",
    "NotRegistered",
    "RateLimited",
    "SimChainState",
    "SimSubstrate",
    "connect",
]
