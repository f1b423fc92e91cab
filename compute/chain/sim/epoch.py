"""The simulated chain's epoch: read stakes, permits and weight rows, run Yuma consensus.

Reads only (the simulated chain does not mint emission); the result says what the real chain
would compute from the same state: consensus per miner, each validator's trust, incentive and
dividends. Used by ``localnet --validators K`` and ``python -m compute chain epoch``.
"""

from __future__ import annotations

import numpy as np

from .state import SimChainState
from .yuma import DEFAULT_KAPPA, YumaResult, yuma_epoch


def epoch_inputs(state: SimChainState, netuid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stake in TAO, weight matrix as stored u16 values, validator permits), indexed by uid."""
    neurons = state.neurons(netuid)
    n = max((row.uid for row in neurons), default=-1) + 1
    stake = np.zeros(n)
    permit = np.zeros(n, bool)
    for row in neurons:
        stake[row.uid] = row.stake_rao / 1e9
        permit[row.uid] = row.validator_permit
    weights = np.zeros((n, n))
    for uid, pairs in state.weights(netuid).items():
        for dest, value in pairs:
            if uid < n and dest < n:
                weights[uid, dest] = value
    return stake, weights, permit


def run_epoch(state: SimChainState, netuid: int, kappa: float = DEFAULT_KAPPA) -> YumaResult:
    """Yuma consensus over the chain's current state (bonds start fresh: one epoch's view)."""
    stake, weights, permit = epoch_inputs(state, netuid)
    return yuma_epoch(stake, weights, permit, kappa=kappa)
