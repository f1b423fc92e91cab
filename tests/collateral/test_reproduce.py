"""Reproduction of cheat evidence at one validator: its own store, book and judge (no chain needed).

Real signatures, a real ``ValidatorStore``, the judge without an EVM key (it never attests: an
evidence it would attest stays pending, ``None``); the clock is injected to close windows.
"""

from __future__ import annotations

import asyncio
import time

from test_evidence import MINER, VALIDATORS
from test_judging import graph

from compute.collateral import machine_id
from compute.collateral.evidence import CheatEvidence, evidence_hash, sign_evidence
from compute.store import PogResult, ValidatorStore
from compute.transport import KeyWallet, MinerClient
from compute.validator.collateral.book import CollateralBook
from compute.validator.collateral.judging import Judge
from compute.validator.collateral.peers import Peers
from compute.validator.collateral.reproduce import CheatJudge

FORGED = "fp16 proof rejected: gpu 0: Merkle path of row 3 does not match the root"
MACHINE = "0x" + machine_id(["GPU-1", "GPU-2"]).hex()


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def desk(tmp_path, verified: bool = True, cheat: bool = True, window: float = 600.0):
    clock = Clock()
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
        store=store,
        miners=MinerClient(KeyWallet(VALIDATORS[2])),
        client=None,
        dead_s=600.0,
        leader_grace_s=1.0,
        clock=clock,
        cheats=cheats,
    )
    return clock, store, book, cheats, judge


def peer_cheat(gpus: int = 2, round_id: str = "7") -> CheatEvidence:
    return CheatEvidence(
        miner_hotkey=MINER.ss58_address,
        machine=MACHINE,
        gpus=gpus,
        round_id=round_id,
        challenge_id=f"round {round_id} uid 5",
        reasons=(FORGED,),
        transcript_sha256="ab" * 32,
    )


def test_own_proven_cheat_is_assembled_once_and_agreed_with(tmp_path) -> None:
    clock, store, book, cheats, judge = desk(tmp_path)
    made = cheats.assemble(graph(), clock.now)
    assert len(made) == 1 and cheats.assemble(graph(), clock.now + 1) == []  # covered: one per window
    evidence = book.evidence(made[0]).evidence
    assert evidence.machine == MACHINE and evidence.gpus == 2 and evidence.reasons == (FORGED,)
    asyncio.run(judge.attest_all(graph()))
    assert book.outcome(made[0]) is None  # reproduced: it would attest (no EVM key here: pending)
    store.close()


def test_a_peers_bogus_evidence_does_not_shield_a_cheat_from_this_validators_own(tmp_path) -> None:
    clock, store, book, cheats, judge = desk(tmp_path)
    shield = book.add_evidence(sign_evidence(VALIDATORS[0], peer_cheat(gpus=8)))  # more GPUs than proven
    assert cheats.assemble(graph(), clock.now) == []  # not judged yet: it covers this step
    asyncio.run(judge.attest_all(graph()))
    assert (book.outcome(shield) or "").startswith("refused: names machine")
    clock.now += 5
    assert len(cheats.assemble(graph(), clock.now)) == 1  # refused evidence covers nothing
    store.close()


def test_without_an_own_cheat_the_evidence_waits_then_is_refused(tmp_path) -> None:
    clock, store, book, _, judge = desk(tmp_path, cheat=False)
    digest = book.add_evidence(sign_evidence(VALIDATORS[0], peer_cheat()))
    asyncio.run(judge.attest_all(graph()))
    assert book.outcome(digest) is None  # waits for its own draw of the miner
    clock.now += 601
    asyncio.run(judge.attest_all(graph()))
    assert book.outcome(digest) == "refused: not reproduced: this validator's own proof of the machine passed"
    assert digest == evidence_hash(peer_cheat()).hex()
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
