"""Simulated chain: SQLite state shared by processes plus the SDK substrate over it.

Use ``bt.Subtensor(substrate=SimSubstrate(SimChainState.open(path)))`` or, more
simply, ``compute.chain.connect("sim:/path/chain.db", netuid)``.
"""

from __future__ import annotations

from .state import (
    AxonUpdate,
    NeuronRow,
    SimChainError,
    SimChainState,
    SimDispatchError,
    SubnetRow,
)
from .substrate import SimCall, SimSubstrate, SimUnsupported

__all__ = [
    "AxonUpdate",
    "NeuronRow",
    "SimCall",
    "SimChainError",
    "SimChainState",
    "SimDispatchError",
    "SimSubstrate",
    "SimUnsupported",
    "SubnetRow",
]
