"""What a validator checks in another validator's evidence before attesting, and its evidence surface.

The evidence here is signed for real (renter, miner, validators: ``test_evidence``'s helpers); the
judge is the validator's own (``compute.validator.collateral.judging``) over its own book, attesting
on the real contract (the in-process EVM).
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from evm_world import World
from test_evidence import DEAD_S, ENDPOINT, LEASE, MINER, VALIDATORS, failed_rental, later

from compute.chain import MetagraphSnapshot, NeuronInfo
from compute.collateral.evidence import Roster, check, sign_evidence, sign_probe
from compute.collateral.lease import LeaseReport
from compute.transport import KeyWallet, MinerClient, serve_in_thread
from compute.validator.collateral.book import CollateralBook
from compute.validator.collateral.judging import Judge
from compute.validator.collateral.peers import Peers
from compute.validator.collateral.surface import build_surface

TAO = 10**18


def graph() -> MetagraphSnapshot:
    neurons = [
        NeuronInfo(i, v.ss58_address, v.ss58_address, 100.0, True, None, True, 0)
        for i, v in enumerate(VALIDATORS)
    ]
    neurons.append(NeuronInfo(5, MINER.ss58_address, MINER.ss58_address, 1.0, False, None, True, 0))
    return MetagraphSnapshot(27, 1, tuple(neurons))


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def judge(tmp_path, client=None, clock=None) -> Judge:
    return Judge(
        keypair=VALIDATORS[2],
        book=CollateralBook(tmp_path / "book"),
        peers=Peers(()),
        miners=MinerClient(KeyWallet(VALIDATORS[2])),
        client=client,
        dead_s=DEAD_S,
        leader_grace_s=1.0,
        clock=clock or time.time,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "own, attests",
    [
        (None, False),  # its own probes never saw the lease dead
        ((-DEAD_S / 2, 0.0), False),  # dead, but shorter than dead_s
        ((-3 * DEAD_S - 60, -2 * DEAD_S - 60), False),  # dead long enough, but not when the others saw it
        ((-DEAD_S, 0.0), True),  # its own run of dead_s overlaps the evidence's: it attests
    ],
    ids=["never-dead-here", "dead-too-briefly-here", "dead-at-another-time", "own-observation"],
)
def test_a_failed_rental_is_attested_only_on_this_validators_own_observation(
    tmp_path, world: World, own, attests: bool
) -> None:
    """The two other validators (2/3 of the stake) signed real probes of a dead lease; this
    validator attests only with its own probe run of dead_s overlapping theirs. Without it the
    evidence waits, then is refused once the term is over; the contract sees nothing."""
    miner = world.party("ev-miner")  # the evidence's miner, with a deposit on the real contract
    miner.client.deposit(5 * TAO)
    evidence = failed_rental(probers=VALIDATORS[:2])
    at = max(p.at for p in evidence.probes)
    clock = Clock(later())
    desk = judge(tmp_path, world.validators[0].client, clock)
    if own is not None:
        desk.book.set_probe(sign_probe(VALIDATORS[2], LEASE, at + own[0], at + own[1], ENDPOINT, "refused"))
    signed = sign_evidence(VALIDATORS[0], evidence)
    desk.book.add_evidence(signed)
    asyncio.run(desk.attest_all(graph()))
    digest = next(iter(desk.book.all_evidence()))
    contract = world.validators[0].client
    on_chain = contract.proposal(check(signed, Roster.of(graph()), clock.now))
    if attests:
        assert desk.book.outcome(digest) == "attested"
        assert (on_chain.state, on_chain.attesters) == ("open", 1)
        return
    assert on_chain.state == "none"
    assert desk.book.outcome(digest) is None  # waits: its probes may still catch up
    clock.now = at + 86_400 + DEAD_S + 10  # the term is over: nothing more to observe
    asyncio.run(desk.attest_all(graph()))
    assert desk.book.outcome(digest) == (
        "refused: not observed: this validator's own probes never saw the lease dead for dead_s"
    )
    assert contract.owed(world.renter.address) == 0


def test_the_surface_takes_a_real_report_and_refuses_forgeries_and_floods(tmp_path) -> None:
    book = CollateralBook(tmp_path / "book")
    server = serve_in_thread(build_surface(book), "127.0.0.1", 0)
    evidence = failed_rental()
    report = LeaseReport(miner_hotkey=MINER.ss58_address, receipt=evidence.receipt, lease=evidence.lease)
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.post("/collateral/report", content=report.model_dump_json()).status_code == 202
            watched = http.get("/collateral/watch").json()["reports"]
            assert [LeaseReport.model_validate(r) for r in watched] == [report]
            forged = json.loads(report.model_dump_json())
            forged["lease"]["body"] = forged["lease"]["body"].replace("40001", "40002")  # another endpoint
            answer = http.post("/collateral/report", content=json.dumps(forged))
            assert answer.status_code == 400 and "signed answer" in answer.json()["detail"]
            assert http.post("/collateral/report", content=b"{" * 70_000).status_code == 413
            assert http.post("/collateral/report", content=b"[]").status_code == 400
            assert http.get("/collateral/probes/" + "0" * 32).status_code == 404
            assert http.get("/collateral/evidence/../../etc/passwd").status_code == 404
            assert http.get("/collateral/evidence").json() == {"evidence": []}
    finally:
        server.stop()
