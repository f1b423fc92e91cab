"""What a validator checks in another validator's evidence before attesting, and its evidence surface.

The evidence here is signed for real (renter, miner, validators: ``test_evidence``'s helpers); the
judge is the validator's own (``compute.validator.collateral.judging``) over its own store.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from test_evidence import MINER, VALIDATORS, failed_rental

from compute.chain import MetagraphSnapshot, NeuronInfo
from compute.collateral import machine_id
from compute.collateral.evidence import sign_evidence
from compute.collateral.lease import LeaseReport
from compute.store import PogResult
from compute.transport import KeyWallet, MinerClient, serve_in_thread
from compute.validator.collateral.book import CollateralBook
from compute.validator.collateral.judging import Judge
from compute.validator.collateral.peers import Peers
from compute.validator.collateral.surface import build_surface


class OwnStore:
    """This validator's store: it verified the miner on two GPUs."""

    def __init__(self, uuids=("GPU-1", "GPU-2"), gpus: int = 2) -> None:
        self.result = PogResult(
            1, 5, MINER.ss58_address, ok=True, sample=1.0, gpu_count=gpus, gpu_uuids=uuids
        )

    def last_verified(self, uid: int, hotkey: str) -> PogResult | None:
        return self.result if hotkey == MINER.ss58_address else None

    def scores(self) -> dict:
        return {}


def graph() -> MetagraphSnapshot:
    neurons = [
        NeuronInfo(i, v.ss58_address, v.ss58_address, 100.0, True, None, True, 0)
        for i, v in enumerate(VALIDATORS)
    ]
    neurons.append(NeuronInfo(5, MINER.ss58_address, MINER.ss58_address, 1.0, False, None, True, 0))
    return MetagraphSnapshot(27, 1, tuple(neurons))


def judge(tmp_path, store: OwnStore) -> Judge:
    return Judge(
        keypair=VALIDATORS[2],
        book=CollateralBook(tmp_path / "book"),
        peers=Peers(()),
        store=store,
        miners=MinerClient(KeyWallet(VALIDATORS[2])),
        client=None,
        dead_s=600.0,
        leader_grace_s=1.0,
        clock=time.time,
    )


@pytest.mark.parametrize(
    "store, named_gpus, expected",
    [
        (OwnStore(), 8, "refused: names machine"),  # an assembler inflating the slash (8 of 2 GPUs)
        (OwnStore(uuids=("GPU-9",)), 2, "refused: names machine"),  # a machine this validator never proved
        (OwnStore(), 2, None),  # agrees: no EVM key here, so it waits (never attests blind)
    ],
    ids=["more-gpus-than-proven", "another-machine", "agrees"],
)
def test_evidence_naming_more_than_this_validator_proved_is_refused(
    tmp_path, store, named_gpus, expected
) -> None:
    evidence = failed_rental().model_copy(
        update={"gpus": named_gpus, "machine": "0x" + machine_id(["GPU-1", "GPU-2"]).hex()}
    )
    signed = sign_evidence(VALIDATORS[0], evidence)
    validators = frozenset(v.ss58_address for v in VALIDATORS)
    outcome = asyncio.run(judge(tmp_path, store)._judge(signed, validators, graph()))
    if expected is None:
        assert outcome is None
    else:
        assert outcome is not None and outcome.startswith(expected), outcome


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
