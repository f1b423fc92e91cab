"""``ValidatorContext``: the validator's shared collaborators, built once by the entry point.

The chain, the store, the signed client, this validator's hotkey, the base round parameters, the
GPU table, the scoring config, the oversight of the fleet (dedup, canaries, rentals), the timed lock
(one timed phase at a time: the round's windows and the presence checks), which miners are queryable
(``allow_same_ip``) and how weights credit a miner (``credit_step``, ``credit_factors``,
``presence_window``). The round, presence and weights loops take one context instead of these as
loose arguments, so each loop's own signature says only what is particular to it.

It holds no per-round or per-miner state (that is ``check.context.MinerCheck``) and does no work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from compute.chain import Chain, MetagraphSnapshot
from compute.scoring import DEFAULT_WINDOW, GpuTable, ScoringConfig
from compute.store import ValidatorStore
from compute.transport import MinerClient
from compute.validator.fleet.oversight import Oversight
from compute.validator.params import RoundParams

CreditFactors = Callable[[MetagraphSnapshot], Awaitable[Mapping[int, float]]]


@dataclass(frozen=True)
class ValidatorContext:
    """What every loop of one validator shares (one instance per validator process)."""

    chain: Chain
    store: ValidatorStore
    client: MinerClient
    hotkey: str  # this validator's own hotkey (never tested, never weighted)
    params: RoundParams  # the base round parameters (each round sets its own id, block, renters)
    table: GpuTable
    scoring: ScoringConfig
    oversight: Oversight = field(default_factory=Oversight)
    timed_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # round windows and presence checks
    allow_same_ip: bool = False  # test every uid of an IP (else the lowest uid per IP)
    credit_step: float = 0.0  # the consensus step (compute.scoring.consensus)
    credit_factors: CreditFactors | None = None  # factors in [0, 1] at the weights (e.g. collateral)
    presence_window: int = DEFAULT_WINDOW  # presence checks a credit's share is taken over


__all__ = ["CreditFactors", "ValidatorContext"]
