"""Reproduction of cheat evidence at one validator: its own store, book and judge (no chain needed).

Real signatures, a real ``ValidatorStore``, the judge without an EVM key (it never attests: an
evidence it would attest stays pending, ``None``); the clock is injected to close windows.
"""

from __future__ import annotations

import asyncio
import time

from test_evidence import MINER, VALIDATORS
from test_judging import graph

from compute.collateral.chain import SlashProposal
from compute.collateral.evidence import (
    CHEAT_EPOCH_S,
    CheatEvidence,
    Roster,
    check,
    evidence_hash,
    sign_evidence,
)
from compute.store import PogResult, ValidatorStore
from compute.transport import KeyWallet, MinerClient
from compute.validator.collateral.book import CollateralBook
from compute.validator.collateral.judging import Judge
from compute.validator.collateral.peers import Peers
from compute.validator.collateral.reproduce import CheatJudge

FORGED = "fp16 proof rejected: gpu 0: Merkle path of row 3 does not match the root"


class Clock:
    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now


def desk(
    tmp_path, verified: bool = True, cheat: bool = True, window: float = 600.0, now: float | None = None
):
    clock = Clock(now)
    store = ValidatorStore(tmp_path / "validator.db")
    record = store.begin_round(1)
    hotkey = MINER.ss58_address
    if verified:
        uuids = ("GPU-1", "GPU-2")
        store.record_result(
            PogResult(
                record.round_id, 5, hotkey, True, 1.0, gpu_count=2, gpu_uuids=uuids, created=clock.now - 60
            )
        )
    store.finish_round(record.round_id, [])
    if cheat:
        record = store.begin_round(2)
        store.record_result(
            PogResult(record.round_id, 5, hotkey, False, 0.0, reasons=(FORGED,), created=clock.now)
        )
        store.finish_round(record.round_id, [])
    book = CollateralBook(tmp_path / "book")
    cheats = CheatJudge(VALIDATORS[2], book, store, window, clock)
    judge = Judge(
        keypair=VALIDATORS[2],
        book=book,
        peers=Peers(()),
        miners=MinerClient(KeyWallet(VALIDATORS[2])),
        client=None,
        dead_s=600.0,
        leader_grace_s=1.0,
        clock=clock,
        cheats=cheats,
    )
    return clock, store, book, cheats, judge


def peer_cheat(gpus: int = 2, round_id: str = "7", proven_at: float | None = None) -> CheatEvidence:
    return CheatEvidence(
        miner_hotkey=MINER.ss58_address,
        gpus=gpus,
        round_id=round_id,
        challenge_id=f"round {round_id} uid 5",
        reasons=(FORGED,),
        transcript_sha256="ab" * 32,
        proven_at=time.time() - 30 if proven_at is None else proven_at,
    )


def test_own_proven_cheat_is_assembled_once_and_agreed_with(tmp_path) -> None:
    clock, store, book, cheats, judge = desk(tmp_path)
    made = cheats.assemble(graph(), clock.now)
    assert len(made) == 1 and cheats.assemble(graph(), clock.now + 1) == []  # covered: one per window
    evidence = book.evidence(made[0]).evidence
    assert evidence.gpus == 2 and evidence.reasons == (FORGED,) and evidence.proven_at == clock.now
    asyncio.run(judge.attest_all(graph()))
    assert book.outcome(made[0]) is None  # reproduced: it would attest (no EVM key here: pending)
    store.close()


def test_a_peers_bogus_evidence_does_not_shield_a_cheat_from_this_validators_own(tmp_path) -> None:
    clock, store, book, cheats, judge = desk(tmp_path)
    shield = book.add_evidence(sign_evidence(VALIDATORS[0], peer_cheat(gpus=8)))  # more GPUs than proven
    assert cheats.assemble(graph(), clock.now) == []  # not judged yet: it covers this step
    asyncio.run(judge.attest_all(graph()))
    assert (book.outcome(shield) or "").startswith("refused: names 8 GPUs")
    clock.now += 5
    assert len(cheats.assemble(graph(), clock.now)) == 1  # refused evidence covers nothing
    store.close()


def test_without_an_own_cheat_the_evidence_waits_then_is_refused(tmp_path) -> None:
    clock, store, book, _, judge = desk(tmp_path, cheat=False)
    evidence = peer_cheat()
    digest = book.add_evidence(sign_evidence(VALIDATORS[0], evidence))
    asyncio.run(judge.attest_all(graph()))
    assert book.outcome(digest) is None  # waits for its own draw of the miner
    clock.now += 601
    asyncio.run(judge.attest_all(graph()))
    assert book.outcome(digest) == "refused: not reproduced: this validator's own proof of the machine passed"
    assert digest == evidence_hash(evidence).hex()
    store.close()


def test_a_validator_that_never_verified_the_machine_never_attests(tmp_path) -> None:
    clock, store, book, cheats, judge = desk(tmp_path, verified=False)
    assert cheats.assemble(graph(), clock.now) == []  # a cheat of an unverified machine: no deposit named
    digest = book.add_evidence(sign_evidence(VALIDATORS[0], peer_cheat()))
    asyncio.run(judge.attest_all(graph()))
    assert book.outcome(digest) is None
    clock.now += 601
    asyncio.run(judge.attest_all(graph()))
    assert book.outcome(digest) == "refused: not reproduced: this validator never verified the machine"
    store.close()


def test_one_own_proof_backs_one_incident_however_the_cheat_is_re_served(tmp_path) -> None:
    """A colluding validator serves the same cheat twice, dated on either side of a window's
    boundary (two incidents on chain): this validator's one proof backs the first it judges only;
    the other waits for a proof of its own, and is refused when the window closes."""
    boundary = (int(time.time()) // CHEAT_EPOCH_S + 1) * CHEAT_EPOCH_S
    clock, store, book, cheats, _ = desk(tmp_path, now=boundary + 100)  # its own proof: just after
    roster = Roster.of(graph())
    before, after = (
        sign_evidence(VALIDATORS[0], peer_cheat(proven_at=t)) for t in (boundary - 100, boundary + 50)
    )
    first, second = (check(s, roster, clock.now) for s in (before, after))
    assert first.incident != second.incident  # two incidents: the contract would slash each once
    assert isinstance(cheats.judge(before, first, graph()), SlashProposal)  # its proof backs this one
    assert isinstance(cheats.judge(before, first, graph()), SlashProposal)  # ... again, the same incident
    assert cheats.judge(after, second, graph()) is None  # no proof left for another incident: waits
    clock.now += 601
    assert cheats.judge(after, second, graph()) == (
        "refused: not reproduced: this validator's own proof of the machine passed"
    )
    store.close()
