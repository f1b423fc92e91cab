"""From probes to a slash: assemble evidence of a failed rental, check every validator's evidence,
and attest only what this validator observed or proved itself.

Assembling (``assemble``): a reported lease this validator itself saw dead for ``dead_s`` inside
its term becomes one :class:`FailedRentalEvidence` once the qualifying probes in hand (its own and
its peers': never the renter's, the miner's or their coldkeys', never dated in its future) come
from validators holding ``MIN_PROBE_SHARE`` of the stake; probes in canonical order, signed and kept
in the book. To keep validators from serving several documents of one incident, the validator with
the most stake among the probers assembles, and every assembler first waits one sync period after
its own probe qualified (to see the others' probes and evidence); the others wait
``leader_grace_s`` for the leader's evidence before assembling their own.

Attesting (``attest_all``): each evidence known (own or fetched) is checked (``evidence.check``:
signatures, both halves of the rental, the GPUs both parties signed, canonical probes by stake),
and then this validator looks for **its own observation**: its own signed probe run of at least
``dead_s`` inside the term, overlapping the evidence's dead window. Peers' probes may speed
assembly; they never replace that. Without it the evidence waits (this validator's probes may
still catch up) until the term is over, then is refused. The miner is asked for the renter's own
signed release (``LeaseEndRequest``): a lease its renter released before the last probe is no
failure. The proposal names the incident (``evidence.incident_of``), so every document of one
failed lease counts toward one proposal and the contract slashes it once; the attestation reaching
``kappa`` of the stake executes the slash and the renter is owed it.

An attested proposal is followed (``follow``): executed, it is closed here; opened again by another
validator after it expired (a validator whose own observation came later: an expired proposal never
blocks fresh evidence), this validator judges the evidence again and joins the fresh opening (its
vote of the expired opening no longer counts); expired and not opened again for ``REOPEN_WATCH_S``,
it is closed here unslashed. This validator never opens its own expired proposal again on its old
observation: the bond would pay the miner for nothing.

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
from compute.collateral import ChainUnavailable, ContractReverted, EvidenceError
from compute.collateral.chain import SlashProposal
from compute.collateral.evidence import (
    MIN_PROBE_SHARE,
    CheatEvidence,
    FailedRentalEvidence,
    LeaseProbe,
    Roster,
    SignedEvidence,
    canonical_probes,
    check,
    counted_probes,
    lease_gpus,
    sign_evidence,
)
from compute.collateral.lease import ReportedLease, check_report, released_at
from compute.protocol import LeaseEndRequest
from compute.transport import MinerClient, TransportError
from compute.validator.collateral.book import CollateralBook, Watched
from compute.validator.collateral.peers import Peers
from compute.validator.collateral.reproduce import CheatJudge

log = logging.getLogger(__name__)
RELEASE_TIMEOUT_S = 15.0
REOPEN_WATCH_S = 86_400.0  # an expired proposal this validator attested is joined if re-opened this long
ATTESTED = "attested"
_CLOSED = ("NothingToSlash", "IncidentUsed", "ProposalClosed", "AlreadyAttested")


def own_observation(own: LeaseProbe | None, evidence: FailedRentalEvidence, dead_s: float) -> bool:
    """Whether this validator's own probe run lasted ``dead_s`` and overlaps the evidence's dead
    window (from its earliest probe's first failed try to its latest probe's last)."""
    if own is None or own.at - own.since < dead_s:
        return False
    start = min(p.since for p in evidence.probes)
    end = max(p.at for p in evidence.probes)
    return own.since <= end and own.at >= start


@dataclass
class Judge:
    keypair: Keypair
    book: CollateralBook
    peers: Peers
    miners: MinerClient
    client: Any | None  # CollateralClient with the validator's EVM key (None: no attestations)
    dead_s: float
    leader_grace_s: float
    clock: Callable[[], float]
    cheats: CheatJudge | None = None  # attests cheat evidence it reproduced (None: never)
    sync_s: float = 0.0  # an assembler waits this long after its own probe qualified
    min_probe_share: float = MIN_PROBE_SHARE
    qualified_at: dict[str, float] = field(default_factory=dict)
    followed_at: dict[str, float] = field(default_factory=dict)  # digest -> last read on chain (own clock)
    _warned: bool = False

    @property
    def hotkey(self) -> str:
        return self.keypair.ss58_address

    # ---------------------------------------------------------------- shared checks

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
        """Evidence for every lease this validator and enough stake saw dead; the hashes made now."""
        roster = Roster.of(metagraph)
        covered = {
            s.evidence.lease_id
            for d, s in self.book.all_evidence().items()
            if isinstance(s.evidence, FailedRentalEvidence)
            and not (self.book.outcome(d) or "").startswith("refused")
        }
        made = []
        for w in watched:
            lease = w.lease
            if lease.lease_id in covered or self.book.outcome(lease.lease_id) is not None:
                continue
            own = self.book.probe(lease.lease_id)
            if own is None or own.at - own.since < self.dead_s:
                continue  # never without this validator's own observation
            probes = self._qualifying([own, *await self.peers.probes(lease.lease_id)], lease, roster, now)
            if self.hotkey not in probes or roster.share(probes) < self.min_probe_share:
                continue
            if not self._my_turn(lease.lease_id, probes, roster, now):
                continue
            digest = await self._make(w, probes, metagraph)
            if digest is not None:
                made.append(digest)
        return made

    def _qualifying(
        self, probes: list[LeaseProbe], lease: ReportedLease, roster: Roster, now: float
    ) -> dict[str, LeaseProbe]:
        good: dict[str, LeaseProbe] = {}
        for probe in probes:
            try:
                if counted_probes((probe,), lease, roster, self.dead_s, now):
                    if probe.validator not in good or probe.at > good[probe.validator].at:
                        good[probe.validator] = probe
            except EvidenceError as error:
                log.info(
                    "collateral lease=%s probe of %s ignored: %s", lease.lease_id, probe.validator[:10], error
                )
        return good

    def _my_turn(self, lease_id: str, probes: dict[str, LeaseProbe], roster: Roster, now: float) -> bool:
        first = self.qualified_at.setdefault(lease_id, now)
        if now - first < self.sync_s:
            return False  # one sync first: the others' probes and evidence arrive
        leader = max(probes, key=lambda hotkey: (roster.stakes.get(hotkey, 0.0), hotkey))
        return leader == self.hotkey or now - first >= self.leader_grace_s

    async def _make(
        self, w: Watched, probes: dict[str, LeaseProbe], metagraph: MetagraphSnapshot
    ) -> str | None:
        lease = w.lease
        last = max(p.at for p in probes.values())
        released = await self.released(metagraph, lease)
        if released is not None and released <= last:
            self.book.set_outcome(lease.lease_id, "released by its renter", self.clock())
            log.info("collateral lease=%s was released by its renter: no failure", lease.lease_id)
            return None
        evidence = FailedRentalEvidence(
            miner_hotkey=lease.miner_hotkey,
            gpus=lease_gpus(lease),
            lease_id=lease.lease_id,
            receipt=w.report.receipt,
            lease=w.report.lease,
            probes=canonical_probes(probes.values()),
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
        roster = Roster.of(metagraph)
        for digest, signed in self.book.all_evidence().items():
            outcome = self.book.outcome(digest)
            if outcome == ATTESTED:
                now = self.clock()
                if now - self.followed_at.get(digest, float("-inf")) < self.sync_s:
                    continue  # read on chain at most once a sync period
                self.followed_at[digest] = now
                outcome = await self.follow(signed, roster)
                if outcome is None:
                    continue
                if outcome != "again":
                    self.book.set_outcome(digest, outcome, self.clock())
                    log.info("collateral evidence %s: %s", digest[:16], outcome)
                    continue
            elif outcome is not None:
                continue
            outcome = await self._judge(signed, roster, metagraph)
            if outcome is not None:
                self.book.set_outcome(digest, outcome, self.clock())
                log.info("collateral evidence %s: %s", digest[:16], outcome)

    async def follow(self, signed: SignedEvidence, roster: Roster) -> str | None:
        """An attested proposal on chain now: a final outcome, "again" (re-opened by another
        validator: judge it again), or None (still open with this validator's vote)."""
        if self.client is None:
            return None
        try:
            proposal = check(signed, roster, self.clock(), self.min_probe_share, self.dead_s)
            state = await asyncio.to_thread(self.client.proposal, proposal)
            mine = await asyncio.to_thread(self.client.attested_in, proposal, self.hotkey)
            now = await asyncio.to_thread(self.client.chain_time)
        except (EvidenceError, ChainUnavailable, ContractReverted) as error:
            log.debug("collateral follow deferred: %s", error)
            return None
        if state.state == "executed":
            return "slash executed"
        if state.state == "open" and now <= state.expires_at:
            return None if mine == state.openings else "again"
        return "expired unslashed" if now > state.expires_at + REOPEN_WATCH_S else None

    async def _judge(
        self, signed: SignedEvidence, roster: Roster, metagraph: MetagraphSnapshot
    ) -> str | None:
        """This validator's outcome for one evidence (None: try again at the next step)."""
        if isinstance(signed.evidence, CheatEvidence) and self.cheats is None:
            return "not attested: cheat evidence rests on an unsigned transcript"
        now = self.clock()
        try:
            proposal = check(signed, roster, now, self.min_probe_share, self.dead_s)
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
        own = self.book.probe(lease.lease_id)
        if not own_observation(own, evidence, self.dead_s):
            if now > lease.term_end + self.leader_grace_s + self.dead_s:
                return (
                    "refused: not observed: this validator's own probes never saw the lease dead for dead_s"
                )
            log.info(
                "collateral lease=%s: no own observation of it dead (yet); evidence waits", lease.lease_id
            )
            return None
        assert own is not None
        released = await self.released(metagraph, lease)
        if released is not None and released <= max(own.at, *(p.at for p in evidence.probes)):
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
        return ATTESTED


__all__ = ["ATTESTED", "Judge", "own_observation"]
