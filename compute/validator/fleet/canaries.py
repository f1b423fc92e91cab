"""A round's canary rentals: which miners, when, signed by whom, and what the ledger keeps.

Each round every miner is drawn for a canary with probability ``canary_rate × p`` (``p``: the
schedule's chance that this validator tests a miner this round, so canaries follow the same load
budget), whether or not it is tested: when a canary comes says nothing about the validator's own
tests. It starts at a random moment of the round's spread, signed by one of the validator's renter
identities (``CanaryRenter``: its own hotkey, and the operator hotkeys it rents through,
``--validator.canary_hotkeys``), each in turn per miner in a random order. A miner tested in the same round takes the test and the
canary in turn (one lock per miner), so neither sees the other's lease as a refusal. A canary the
miner turned down for lack of capacity, twice, is excused only when the rentals it verifiably holds
leave fewer GPUs free than the canary asked for.

What it deliberately does not do: score (the ledger's availability factor does) or talk to a miner
itself (``rentals.canary`` does, through the operator service).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from compute.transport import MinerClient
from compute.validator.params import MinerTarget, RoundParams
from compute.validator.rentals.canary import CanaryOutcome, CanaryRenter, CanaryTiming, run_canary
from compute.validator.rentals.ledger import RentalLedger
from compute.validator.rentals.receipts import Renters, check_rentals
from compute.validator.rentals.truth import MinerNotes

log = logging.getLogger(__name__)


@dataclass
class CanaryDesk:
    """The validator's renter identities and its canaries' bookkeeping (held for its lifetime)."""

    renters: list[CanaryRenter]
    ledger: RentalLedger
    rng: random.Random
    timing: CanaryTiming = field(default_factory=CanaryTiming)
    dwell_s: float | None = None  # fixed dwell (tests, the demo); None: drawn from ``timing``
    _decks: dict[str, list[CanaryRenter]] = field(default_factory=dict, init=False, repr=False)

    def signer_for(self, miner_hotkey: str, signers: list[CanaryRenter]) -> CanaryRenter:
        """The next renter identity for this miner: each one in turn, in a fresh random order per
        turn (a miner refusing any one identity meets it among every ``len(signers)`` canaries)."""
        deck = [renter for renter in self._decks.get(miner_hotkey, []) if renter in signers]
        if not deck:
            deck = list(signers)
            self.rng.shuffle(deck)
        self._decks[miner_hotkey] = deck[1:]
        return deck[0]

    def own_keys(self, now: float) -> frozenset[str]:
        """SSH public keys of every canary this validator issued that may still be in its term."""
        return frozenset().union(*(renter.own_keys(now) for renter in self.renters))

    def signers(self, registered: frozenset[str]) -> list[CanaryRenter]:
        """Renter identities a miner can serve: registered on the subnet (miners refuse the rest)."""
        usable = [renter for renter in self.renters if renter.hotkey in registered]
        for renter in self.renters:
            if renter.hotkey not in registered:
                log.warning("canary hotkey %s is not registered on the subnet: not used", renter.hotkey)
        return usable

    async def one(
        self,
        client: MinerClient,
        target: MinerTarget,
        params: RoundParams,
        notes: MinerNotes | None,
        renter: CanaryRenter,
    ) -> CanaryOutcome:
        """Run one canary on ``target`` signed by ``renter``; record it (unless excused) in the ledger."""
        renters = Renters(params.trusted_renters, params.renter_coldkeys, params.own_canaries)

        async def excuse(asked: int, claimed: int) -> bool:
            check = await check_rentals(
                client, target.endpoint, target.hotkey, renters, time.time(), params.rental_probe_timeout
            )
            return claimed > 0 and check.rented_gpus + asked > claimed

        outcome = await run_canary(renter, target, self.rng, self.timing, excuse, self.dwell_s)
        if not outcome.excused:
            self.ledger.canary(target.hotkey, outcome)
        if notes is not None:
            notes.canary = outcome
        return outcome

    def start(
        self,
        client: MinerClient,
        targets: list[MinerTarget],
        params: RoundParams,
        notes: Mapping[int, MinerNotes],
        locks: Mapping[int, asyncio.Lock],
        spread_s: float,
        deadline: float,
        registered: frozenset[str],
    ) -> dict[int, asyncio.Task[CanaryOutcome | None]]:
        """One task per target: wait a random moment of the round, then the canary (before ``deadline``)
        signed by the target's next renter identity among the ``registered`` ones."""
        signers = self.signers(registered)
        if not signers:
            return {}

        async def later(target: MinerTarget) -> CanaryOutcome | None:
            renter = self.signer_for(target.hotkey, signers)
            await asyncio.sleep(self.rng.uniform(0.0, spread_s) if spread_s > 0 else 0.0)
            budget = deadline - time.monotonic()
            if budget < 2 * self.timing.timeout_s:
                log.info("uid=%d canary skipped: the round ends before it could", target.uid)
                return None
            async with locks[target.uid]:
                try:
                    canary = self.one(client, target, params, notes.get(target.uid), renter)
                    return await asyncio.wait_for(canary, budget)
                except asyncio.TimeoutError:
                    log.info("uid=%d canary cut by the round's deadline", target.uid)
                    return None

        return {t.uid: asyncio.create_task(later(t), name=f"canary-{t.uid}") for t in targets}


__all__ = ["CanaryDesk"]
