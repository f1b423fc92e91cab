"""Cheat evidence every attester reproduces itself: assembled from this validator's own proven
cheats, attested only when its own round proved the same cheat, each own proof backing one
incident.

A PoG transcript is not signed by the miner, so one validator's word that a miner cheated is not
evidence for anyone else. The rule is reproduction instead:

- **Assembling** (``assemble``): a failed test recorded by this validator's own round whose reasons
  prove a wrong answer by mathematics (``cheats.proven_cheat``: never a timeout, an absence, garbage,
  a rented machine or a validator error) becomes one :class:`CheatEvidence` for the miner's hotkey
  (its one deposit), the GPUs this validator proved, the round, the digest of the verdict record and
  when it was proven (its window is the incident); signed, kept in the book, served on the surface.
  Not when the miner was never verified here, nor when cheat evidence for the same hotkey is known
  already inside the window and neither refused nor expired here (one proposal per cheat window, so
  a persistent cheat is not slashed once per validator that caught it; a peer's bogus evidence, once
  refused, shields nothing; an expired one blocks no fresh evidence).
- **Attesting** (``judge``): a cheat evidence (its own or a peer's) is attested only if this
  validator's own store holds a proven cheat of the same hotkey within ``window_s`` of the moment
  it first saw the evidence (its own clock) and of the moment the evidence says it was proven, that
  no other incident used already (one own proof backs one incident: the same cheat re-served under
  another window is not slashed twice), and the evidence names at most the GPUs it proved. It never
  re-runs anything on the other validator's word; without an own verdict it waits for its ordinary
  draw of the miner, and refuses once the window has passed (its own proofs passed, or it did not
  test the machine). The contract's quorum then slashes, partial first, burned (no renter).

What it deliberately does not do: touch the round (it reads the store the round writes), or talk to
the contract (``judging`` attests what this returns).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from bittensor.sp_core import Keypair

from compute.chain import MetagraphSnapshot
from compute.collateral.chain import SlashProposal
from compute.collateral.evidence import (
    CheatEvidence,
    SignedEvidence,
    cheat_incident,
    evidence_hash,
    sign_evidence,
)
from compute.collateral.windows import ASSEMBLY_S
from compute.store import PogResult
from compute.validator.collateral.book import CollateralBook
from compute.validator.collateral.cheats import proven_cheat, verdict_digest
from compute.validator.collateral.credit import VerifiedSource, proven_units

log = logging.getLogger(__name__)
DEFAULT_WINDOW_S = 86_400.0
MAX_REASONS = 16
RESCAN_S = 600.0  # a test's result is recorded at most this long after it was stamped


class VerdictSource(VerifiedSource, Protocol):
    """What reproduction reads of the validator's store (``compute.store.ValidatorStore``)."""

    def failures_since(self, since: float, hotkey: str | None = None) -> list[PogResult]: ...


@dataclass(frozen=True)
class Proven:
    """What this validator itself proved of a miner: its GPUs, when last verified."""

    gpus: int
    verified_at: float


@dataclass
class CheatJudge:
    keypair: Keypair
    book: CollateralBook
    store: VerdictSource
    window_s: float
    clock: Callable[[], float]
    seen_at: dict[str, float] = field(default_factory=dict)  # evidence hash -> first seen, own clock
    _scanned: float | None = None

    def proven(self, uid: int, hotkey: str) -> Proven | None:
        result = self.store.last_verified(uid, hotkey)
        return Proven(proven_units(result), result.created) if result is not None else None

    def _seen(self, digest: str, now: float) -> float:
        return self.seen_at.setdefault(digest, now)

    def covered(self, hotkey: str, now: float) -> bool:
        """Cheat evidence for ``hotkey`` first seen here within the window and neither refused nor
        expired here (a peer's bogus evidence cannot shield a cheat from this validator's own, and
        an expired proposal blocks no fresh evidence)."""
        for digest, signed in self.book.all_evidence().items():
            evidence = signed.evidence
            outcome = self.book.outcome(digest) or ""
            if (
                isinstance(evidence, CheatEvidence)
                and evidence.miner_hotkey == hotkey
                and now - self._seen(digest, now) <= self.window_s
                and not outcome.startswith(("refused", "expired"))
            ):
                return True
        return False

    def assemble(self, metagraph: MetagraphSnapshot, now: float) -> list[str]:
        """Evidence for the cheats this validator's round proved since the last scan; the hashes made."""
        since = now - self.window_s
        if self._scanned is not None:  # results land a little after they are stamped: rescan a margin
            since = max(since, self._scanned - RESCAN_S)
        failures, self._scanned = self.store.failures_since(since), now
        made = []
        for result in failures:
            reasons = proven_cheat(result)
            if not reasons or metagraph.uid_of(result.hotkey) != result.uid:
                continue
            if self.book.backing(verdict_digest(result)) is not None:
                continue  # this proof backs an incident already
            view = self.proven(result.uid, result.hotkey)
            if view is None:
                log.info("collateral uid=%d cheat proven, but never verified here: no evidence", result.uid)
                continue
            if self.covered(result.hotkey, now):
                continue
            evidence = CheatEvidence(
                miner_hotkey=result.hotkey,
                gpus=view.gpus,
                round_id=str(result.round_id),
                challenge_id=f"round {result.round_id} uid {result.uid}",
                reasons=reasons[:MAX_REASONS],
                transcript_sha256=verdict_digest(result),
                proven_at=result.created,
            )
            digest = self.book.add_evidence(sign_evidence(self.keypair, evidence))
            self.seen_at.setdefault(digest, now)
            made.append(digest)
            log.info(
                "collateral uid=%d hotkey=%s cheat evidence %s assembled: %s",
                result.uid,
                result.hotkey[:10],
                digest[:16],
                reasons[0][:120],
            )
        return made

    def judge(
        self, signed: SignedEvidence, proposal: SlashProposal, metagraph: MetagraphSnapshot
    ) -> SlashProposal | str | None:
        """The proposal to attest (reproduced here), a final outcome (refused), or None (wait)."""
        evidence = signed.evidence
        assert isinstance(evidence, CheatEvidence)
        now = self.clock()
        seen = self._seen(evidence_hash(evidence).hex(), now)
        closed = now > seen + self.window_s
        uid = metagraph.uid_of(evidence.miner_hotkey)
        view = self.proven(uid, evidence.miner_hotkey) if uid is not None else None
        if view is None:
            return "refused: not reproduced: this validator never verified the machine" if closed else None
        if evidence.gpus > view.gpus:
            return f"refused: names {evidence.gpus} GPUs, this validator proved {view.gpus}"
        incident = cheat_incident(evidence.miner_hotkey, evidence.proven_at).hex()
        own = [
            r
            for r in self.store.failures_since(seen - self.window_s, evidence.miner_hotkey)
            if r.uid == uid
            and r.created <= seen + self.window_s
            and abs(r.created - evidence.proven_at) <= self.window_s
            and proven_cheat(r)
            and self.book.backing(verdict_digest(r)) in (None, incident)
        ]
        if own:
            if now > seen + self.window_s + ASSEMBLY_S:
                return "refused: the cheat window closed before this validator could attest"
            for result in own:
                self.book.set_backing(verdict_digest(result), incident)
            log.info(
                "collateral uid=%s cheat reproduced by this validator's round %d: %s",
                uid,
                own[0].round_id,
                proven_cheat(own[0])[0][:120],
            )
            return proposal
        if not closed:
            return None
        if seen - self.window_s <= view.verified_at <= seen + self.window_s:
            return "refused: not reproduced: this validator's own proof of the machine passed"
        return "refused: not reproduced: this validator did not test the machine in the window"


__all__ = ["DEFAULT_WINDOW_S", "CheatJudge", "Proven", "VerdictSource"]
