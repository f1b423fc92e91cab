"""How collateral posted scales a miner's credit (pure).

A machine's credit is multiplied by ``floor + (1 - floor) * min(1, standing / required)``:
full credit once the deposit standing (held, less any pending reclaim) reaches the required
amount (one day of rent of the proven GPUs), a linear ramp down to ``floor`` with no deposit.
Only a deposit read from the contract counts: nothing the miner says about it. The factor never
exceeds 1, so collateral can only restore credit, never add to what the proofs earned.
"""

from __future__ import annotations

DEFAULT_FLOOR = 0.5


def collateral_factor(standing_wei: int, required_wei: int, floor: float = DEFAULT_FLOOR) -> float:
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor must be in [0, 1], got {floor}")
    if required_wei <= 0:
        return 1.0
    share = min(1.0, max(0, standing_wei) / required_wei)
    return floor + (1.0 - floor) * share
