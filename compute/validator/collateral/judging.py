"""From probes to a slash: assemble evidence once enough validators saw a lease dead, check every
validator's evidence, and attest what holds on the contract.

Assembling (``assemble``): a reported lease this validator saw dead for ``dead_s`` inside its term,
with qualifying probes of at least ``MIN_PROBES`` distinct validators (its own and its peers'),
becomes one :class:`FailedRentalEvidence`, signed and kept in the book. To keep validators from
splitting votes over different probe sets, the validator with the most stake among the probers
assembles; the others wait ``leader_grace_s`` for its evidence before assembling their own.

Attesting (``attest_all``): each evidence known (own or fetched) is checked (``evidence.check``:
signatures, both halves of the rental, probes in the term, long enough), compared with this
validator's own view of the miner's machine (the machine id it verified and at most its proven GPU
count: a slash cannot be inflated by naming more GPUs), and the miner is asked for the renter's own
signed release (``LeaseEndRequest``): a lease its renter released before the last probe is no
failure. Only then does the validator attest; the attestation reaching ``kappa`` of the stake
executes the slash and the renter is owed it. Each evidence gets one outcome, kept in the book.

Cheat evidence is attested only when this validator reproduced the cheat in its own round
(``reproduce``): a PoG transcript is not signed by the miner, so another validator's word is not
evidence. Without a ``CheatJudge`` it is never attested.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bittensor.sp_core import Keypair

from compute.chain import MetagraphSnapshot
from compute.collateral import ChainUnavailable, ContractReverted, EvidenceError, machine_of
from compute.collateral.chain import SlashProposal
from compute.collateral.evidence import (
    MIN_PROBES,
    CheatEvidence,
    FailedRentalEvidence,
    LeaseProbe,
    SignedEvidence,
    check,
    counted_probes,
    sign_evidence,
)
from compute.collateral.lease import ReportedLease, check_report, released_at
from compute.protocol import LeaseEndRequest
from compute.transport import MinerClient, TransportError
from compute.validator.collateral.book import CollateralBook, Watched
from compute.validator.collateral.credit import VerifiedSource, proven_units
from compute.validator.collateral.peers import Peers
from compute.validator.collateral.reproduce import CheatJudge

log = logging.getLogger(__name__)
RELEASE_TIMEOUT_S = 15.0
_CLOSED = ("NothingToSlash", "EvidenceUsed", "ProposalClosed", "AlreadyAttested")


@dataclass(frozen=True)
class View:
    """This validator's own view of the machine a lease ran on: its id and the GPUs a slash may take."""

    machine: str  # 0x + 64 hex
    gpus: int


@dataclass
class Judge:
    keypair: Keypair
    book: CollateralBook
    peers: Peers
    store: VerifiedSource
    miners: MinerClient
    client: Any | None  # CollateralClient with the validator's EVM key (None: no attestations)
    dead_s: float
    leader_grace_s: float
    clock: Callable[[], float]
    cheats: CheatJudge | None = None  # attests cheat evidence it reproduced (None: never)
    qualified_at: dict[str, float] = field(default_factory=dict)
    _warned: bool = False

    # ---------------------------------------------------------------- shared checks

    def view(self, metagraph: MetagraphSnapshot, lease: ReportedLease) -> View | None:
        uid = metagraph.uid_of(lease.miner_hotkey)
        result = self.store.last_verified(uid, lease.miner_hotkey) if uid is not None else None
        if result is None:
            return None
        gpus = max(1, min(lease.gpus or 1, proven_units(result)))
        return View("0x" + machine_of(result.gpu_uuids).hex(), gpus)

    async def released(self, metagraph: MetagraphSnapshot, lease: ReportedLease) -> float | None:
        """When the renter released the lease itself (the miner shows its signed request), or None."""
        neuron = metagraph.by_hotkey().get(lease.miner_hotkey)
        if neuron is None or not neuron.axon:
            return None
        try:
            answer = await self.miners.call(
                neuron.axon,
                lease.miner_hotkey,
                LeaseEndRequest(lease_id=lease.lease_id),
                timeout=RELEASE_TIMEOUT_S,
            )
        except TransportError as error:
            log.info("collateral lease=%s miner shows no release (%s)", lease.lease_id, error)
            return None
        return released_at(answer.released, lease)

    # ---------------------------------------------------------------- assembling

    async def assemble(self, watched: list[Watched], metagraph: MetagraphSnapshot, now: float) -> list[str]:
        """Evidence for every lease enough validators saw dead; the hashes made now."""
        validators = frozenset(n.hotkey for n in metagraph.neurons if n.validator_permit)
        covered = {
            s.evidence.lease_id
            for s in self.book.all_evidence().values()
            if isinstance(s.evidence, FailedRentalEvidence)
        }
        made = []
        for w in watched:
            lease = w.lease
            if lease.lease_id in covered or self.book.outcome(lease.lease_id) is not None:
                continue
            own = self.book.probe(lease.lease_id)
            if own is None:
                continue
            probes = self._qualifying([own, *await self.peers.probes(lease.lease_id)], lease, validators)
            if len(probes) < MIN_PROBES:
                continue
            if not self._my_turn(lease.lease_id, probes, metagraph, now):
                continue
            digest = await self._make(w, probes, metagraph)
            if digest is not None:
                made.append(digest)
        return made

    def _qualifying(
        self, probes: list[LeaseProbe], lease: ReportedLease, validators: frozenset[str]
    ) -> dict[str, LeaseProbe]:
        good: dict[str, LeaseProbe] = {}
        for probe in probes:
            try:
                if counted_probes((probe,), lease, validators, self.dead_s):
                    if probe.validator not in good or probe.at > good[probe.validator].at:
                        good[probe.validator] = probe
            except EvidenceError as error:
                log.info(
                    "collateral lease=%s probe of %s ignored: %s", lease.lease_id, probe.validator[:10], error
                )
        return good

    def _my_turn(
        self, lease_id: str, probes: dict[str, LeaseProbe], metagraph: MetagraphSnapshot, now: float
    ) -> bool:
        first = self.qualified_at.setdefault(lease_id, now)
        stake = {n.hotkey: n.stake for n in metagraph.neurons}
        leader = max(probes, key=lambda hotkey: (stake.get(hotkey, 0.0), hotkey))
        return leader == self.keypair.ss58_address or now - first >= self.leader_grace_s

    async def _make(
        self, w: Watched, probes: dict[str, LeaseProbe], metagraph: MetagraphSnapshot
    ) -> str | None:
        lease = w.lease
        view = self.view(metagraph, lease)
        if view is None:
            log.info("collateral lease=%s: this validator never verified the miner's machine", lease.lease_id)
            return None
        last = max(p.at for p in probes.values())
        released = await self.released(metagraph, lease)
        if released is not None and released <= last:
            self.book.set_outcome(lease.lease_id, "released by its renter", self.clock())
            log.info("collateral lease=%s was released by its renter: no failure", lease.lease_id)
            return None
        evidence = FailedRentalEvidence(
            miner_hotkey=lease.miner_hotkey,
            machine=view.machine,
            gpus=view.gpus,
            lease_id=lease.lease_id,
            receipt=w.report.receipt,
            lease=w.report.lease,
            probes=tuple(sorted(probes.values(), key=lambda p: p.validator)),
        )
        digest = self.book.add_evidence(sign_evidence(self.keypair, evidence))
        log.info(
            "collateral lease=%s miner=%s evidence %s assembled from %d validators' probes",
            lease.lease_id,
            lease.miner_hotkey[:10],
            digest[:16],
            len(probes),
        )
        return digest

    # ---------------------------------------------------------------- attesting

    async def attest_all(self, metagraph: MetagraphSnapshot) -> None:
        validators = frozenset(n.hotkey for n in metagraph.neurons if n.validator_permit)
        for digest, signed in self.book.all_evidence().items():
            if self.book.outcome(digest) is not None:
                continue
            outcome = await self._judge(signed, validators, metagraph)
            if outcome is not None:
                self.book.set_outcome(digest, outcome, self.clock())
                log.info("collateral evidence %s: %s", digest[:16], outcome)

    async def _judge(
        self, signed: SignedEvidence, validators: frozenset[str], metagraph: MetagraphSnapshot
    ) -> str | None:
        """This validator's outcome for one evidence (None: try again at the next step)."""
        if isinstance(signed.evidence, CheatEvidence) and self.cheats is None:
            return "not attested: cheat evidence rests on an unsigned transcript"
        try:
            proposal = check(signed, validators, MIN_PROBES, self.dead_s)
        except EvidenceError as error:
            return f"refused: {error}"
        evidence = signed.evidence
        if isinstance(evidence, CheatEvidence):
            assert self.cheats is not None
            reproduced = self.cheats.judge(signed, proposal, metagraph)
            if not isinstance(reproduced, SlashProposal):
                return reproduced
            return await self._attest_if_keyed(reproduced)
        lease = check_report(evidence.report())
        view = self.view(metagraph, lease)
        if view is None:  # not (yet) tested by this validator: judge it once it has been
            log.info(
                "collateral lease=%s: no own verification of the miner yet; evidence waits", lease.lease_id
            )
            return None
        if evidence.machine != view.machine or evidence.gpus > view.gpus:
            return f"refused: names machine {evidence.machine[:10]} x{evidence.gpus}, proven {view.machine[:10]} x{view.gpus}"
        released = await self.released(metagraph, lease)
        if released is not None and released <= max(p.at for p in evidence.probes):
            return "refused: the renter released the lease itself"
        return await self._attest_if_keyed(proposal)

    async def _attest_if_keyed(self, proposal: SlashProposal) -> str | None:
        if self.client is None:
            if not self._warned:
                log.warning(
                    "collateral: no EVM key for this validator, so it checks evidence but never attests"
                )
                self._warned = True
            return None
        return await self._attest(proposal)

    async def _attest(self, proposal: Any) -> str | None:
        try:
            result = await asyncio.to_thread(self.client.attest, proposal)  # type: ignore[union-attr]
        except ContractReverted as error:
            if error.error in _CLOSED:
                return f"closed on chain ({error.error})"
            if error.error == "NotValidator":  # the EVM key's association is not on chain (yet)
                log.warning("collateral attest deferred: this validator's EVM key is not associated")
                return None
            return f"refused by the contract: {error}"
        except ChainUnavailable as error:
            log.warning("collateral attest deferred: %s", error)
            return None
        slashed = result.event("Slashed")
        if slashed is not None:
            args = slashed.args
            return f"attested; slash executed: {args['amount']} wei, {args['toRenter']} wei owed to {args['renter']}"
        return "attested"


__all__ = ["Judge", "View"]
