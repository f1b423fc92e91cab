"""A round's canary rentals: which miners, when, signed by whom, and what the ledger keeps.

Each round every miner is drawn for a canary with probability ``canary_rate × p`` (``p``: the
schedule's chance that this validator tests a miner this round, so canaries follow the same load
budget), whether or not it is tested. It starts at a random moment of the round's whole interval
(not of the spread its tests start in, and it may outlive the round's step: the desk holds it), so
when a canary comes says nothing about the validator's own tests or its round's phase. A miner
with a canary still running gets no second one.

Who signs it: a canary is an observation of how a miner treats renters only if the miner cannot
tell it from a renter, chain lookups included. So it is signed by one of the validator's operator
identities (``--validator.canary_hotkeys``) registered on the subnet under a coldkey that no
validator holds: a miner that serves every key of a validator's coldkey (the validator's own
hotkey, any hotkey registered beside it) and turns every other renter away turns these away too.
An identity the metagraph links to a validator (its coldkey is this validator's or a permitted
validator's) is not used (logged): it would only be served. The validator's own hotkey signs
canaries only for a miner whose access policy openly refuses ordinary renters (learned from an
earlier canary, never from this one: a refusal followed at once by the validator's own canary
would link the refused key to it), or when no ordinary identity is usable; each identity in turn
per miner, in a random order. A miner tested while its canary runs takes the test and the canary
in turn (one lock per miner, held across rounds), so neither sees the other's lease as a refusal.
A canary the miner turned down for lack of capacity, twice, is excused only when the rentals the
validator last verified it holding (still in their signed terms: the ledger's memory, not a call to
the miner then, which would link the refused renter to this validator) leave fewer GPUs free than
the canary asked for.

What it deliberately does not do: score (the ledger's availability factor does) or talk to a miner
itself (``rentals.canary`` does, through the operator service).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from compute.chain import MetagraphSnapshot
from compute.store import Offer
from compute.validator.params import MinerTarget
from compute.validator.rentals.canary import CanaryOutcome, CanaryRenter, CanaryTiming, run_canary
from compute.validator.rentals.ledger import RentalLedger
from compute.validator.rentals.truth import MinerNotes

log = logging.getLogger(__name__)


CLOSED_OWN_SHARE = 0.75  # of a closed miner's canaries, signed by the validator's own hotkey


@dataclass(frozen=True)
class Signers:
    """The identities a round may sign canaries with: ``ordinary`` (registered, on coldkeys no
    validator holds) and ``own`` (the validator's hotkey; None when not among the renters)."""

    ordinary: tuple[CanaryRenter, ...]
    own: CanaryRenter | None


@dataclass
class CanaryDesk:
    """The validator's renter identities and its canaries' bookkeeping (held for its lifetime)."""

    renters: list[CanaryRenter]
    ledger: RentalLedger
    rng: random.Random
    timing: CanaryTiming = field(default_factory=CanaryTiming)
    dwell_s: float | None = None  # fixed dwell (tests, the demo); None: drawn from ``timing``
    # keeps each miner's answer to a canary's look (the store's ``record_offer``: the public feed's
    # price and free-now); informational, no score reads it
    offers: Callable[[int, str, Offer], None] | None = None
    _decks: dict[str, list[CanaryRenter]] = field(default_factory=dict, init=False, repr=False)
    _closed: set[str] = field(default_factory=set, init=False, repr=False)  # miners open to validators only
    _pending: dict[int, asyncio.Task[CanaryOutcome | None]] = field(
        default_factory=dict, init=False, repr=False
    )
    _locks: dict[int, asyncio.Lock] = field(default_factory=dict, init=False, repr=False)

    def lock(self, uid: int) -> asyncio.Lock:
        """The miner's turn: its canary and the validator's test of it never hold leases at once."""
        return self._locks.setdefault(uid, asyncio.Lock())

    def signers(self, metagraph: MetagraphSnapshot) -> Signers:
        """The identities a miner cannot link to a validator on chain, and the validator's own."""
        coldkey = {n.hotkey: n.coldkey for n in metagraph.neurons}
        own = next((r for r in self.renters if r.validator and r.hotkey in coldkey), None)
        linked = {n.coldkey for n in metagraph.neurons if n.validator_permit}
        linked |= {coldkey[r.hotkey] for r in self.renters if r.validator and r.hotkey in coldkey}
        ordinary = []
        for renter in self.renters:
            if renter.validator:
                continue
            if renter.hotkey not in coldkey:
                log.warning("canary hotkey %s is not registered on the subnet: not used", renter.hotkey)
            elif coldkey[renter.hotkey] in linked:
                log.warning(
                    "canary hotkey %s is on a validator's coldkey (%s): a miner sees that on chain, not used",
                    renter.hotkey,
                    coldkey[renter.hotkey],
                )
            else:
                ordinary.append(renter)
        return Signers(tuple(ordinary), own)

    def signer_for(self, miner_hotkey: str, signers: Signers) -> CanaryRenter | None:
        """The next identity for this miner: an ordinary one, each in turn in a fresh random order
        per turn (a miner refusing any one meets it among every ``len(ordinary)`` canaries); the
        validator's own hotkey for a miner known to admit no ordinary renter (mostly: now and then
        an ordinary one asks again, to notice it opening), or when there is no ordinary one."""
        ordinary, own = list(signers.ordinary), signers.own
        closed = miner_hotkey in self._closed and self.rng.random() < CLOSED_OWN_SHARE
        if own is not None and (closed or not ordinary):
            return own
        if not ordinary:
            return None
        deck = [renter for renter in self._decks.get(miner_hotkey, []) if renter in ordinary]
        if not deck:
            deck = ordinary
            self.rng.shuffle(deck)
        self._decks[miner_hotkey] = deck[1:]
        return deck[0]

    def own_keys(self, now: float) -> frozenset[str]:
        """SSH public keys of every canary this validator issued that may still be in its term."""
        return frozenset().union(*(renter.own_keys(now) for renter in self.renters))

    async def one(self, target: MinerTarget, notes: MinerNotes | None, renter: CanaryRenter) -> CanaryOutcome:
        """Run one canary on ``target`` signed by ``renter``; record it (unless excused) in the ledger."""

        async def excuse(asked: int, claimed: int) -> bool:
            return claimed > 0 and self.ledger.held_gpus(target.hotkey, time.time()) + asked > claimed

        outcome = await run_canary(renter, target, self.rng, self.timing, excuse, self.dwell_s)
        if outcome.closed:
            self._closed.add(target.hotkey)
        elif not renter.validator:
            self._closed.discard(target.hotkey)
        if not outcome.excused:
            self.ledger.canary(target.hotkey, outcome)
        if notes is not None:
            notes.canary = outcome
        if outcome.offer is not None and self.offers is not None:
            try:
                self.offers(target.uid, target.hotkey, outcome.offer)
            except Exception:  # the feed's bookkeeping never fails a canary
                log.exception("uid=%d offer not recorded", target.uid)
        return outcome

    def start(
        self,
        targets: list[MinerTarget],
        notes: Mapping[int, MinerNotes],
        interval_s: float,
        metagraph: MetagraphSnapshot,
    ) -> dict[int, asyncio.Task[CanaryOutcome | None]]:
        """One task per target without a canary still running: wait a random moment of the round's
        ``interval_s``, then the canary (within ``timing.bound_s``), signed by the target's next
        identity. The desk holds the tasks: a round that ends first leaves them running."""
        signers = self.signers(metagraph)
        started: dict[int, asyncio.Task[CanaryOutcome | None]] = {}
        for target in targets:
            running = self._pending.get(target.uid)
            renter = (
                None
                if running is not None and not running.done()
                else self.signer_for(target.hotkey, signers)
            )
            if renter is None:
                continue
            delay = self.rng.uniform(0.0, interval_s) if interval_s > 0 else 0.0
            task = asyncio.create_task(
                self._later(target, notes.get(target.uid), renter, delay),
                name=f"canary-{target.uid}",
            )
            self._pending[target.uid] = started[target.uid] = task
        return started

    async def _later(
        self, target: MinerTarget, notes: MinerNotes | None, renter: CanaryRenter, delay: float
    ) -> CanaryOutcome | None:
        await asyncio.sleep(delay)
        async with self.lock(target.uid):
            try:
                return await asyncio.wait_for(self.one(target, notes, renter), self.timing.bound_s)
            except asyncio.TimeoutError:
                log.info("uid=%d canary took more than %.0fs: cut", target.uid, self.timing.bound_s)
                return None


__all__ = ["CanaryDesk", "Signers"]
