"""Every miner can read why it scored what it did: the validator's signed verdict reaches
the miner after a real round, is kept as signed, and ``python -m compute miner-report`` shows it;
an edited verdict shows as unverified. Real miner app (signed transport) on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from validator_helpers import small_params

from compute.miner import verdicts as miner_verdicts
from compute.miner.verdicts import FILE_NAME, VerdictLog
from compute.protocol import VerdictRequest
from compute.scoring import ScoringConfig, load_gpu_table
from compute.store import PogResult
from compute.validator import MinerCheck, MinerTarget, check_miner
from compute.validator.report.verdicts import tell_miners, verdict_of


def test_a_verdict_carries_the_reasons_and_the_validators_figures_within_the_wire_bounds() -> None:
    result = PogResult(
        7,
        3,
        "hk",
        ok=False,
        sample=0.0,
        reasons=("x" * 1000, *[f"r{i}" for i in range(30)]),
        tflops_fp32=float("inf"),
        mem_gbs=812.5,
        timings={"rtt_s": 0.31},
    )
    message = verdict_of(result, score=1.25)
    assert VerdictRequest.model_validate_json(message.model_dump_json()) == message
    assert len(message.reasons) == 16 and len(message.reasons[0]) == 400
    assert message.figures.tflops_fp32 is None  # a non-finite figure is left out, never sent
    assert message.figures.memory_gbs == 812.5 and message.figures.round_trip_ms == pytest.approx(310.0)
    assert message.score == 1.25 and not message.ok


@pytest.mark.slow
async def test_the_miner_reads_its_verdict_signed_by_the_validator(
    tmp_path: Path, start_miner, validator_client, capsys
) -> None:
    miner = start_miner("explained")
    target = MinerTarget(1, miner.hotkey, miner.endpoint)
    result = await check_miner(
        MinerCheck(validator_client, target, small_params(), load_gpu_table(), ScoringConfig())
    )
    assert result.ok, result.reasons
    assert await tell_miners(validator_client, [result], {1: target}, {1: 0.5}) == 1
    path = tmp_path / "explained" / FILE_NAME
    (kept,) = VerdictLog(path).read(miner.hotkey)
    assert kept.validator == validator_client.hotkey  # the signature verifies, for this miner
    assert kept.request.ok and kept.request.sample == pytest.approx(result.sample)
    assert list(kept.request.reasons) == list(result.reasons) and kept.request.score == 0.5
    assert kept.request.figures.round_trip_ms is not None and kept.request.figures.tflops_fp32 > 0

    assert (
        miner_verdicts.main(["--miner.data_dir", str(path.parent), "--hotkey", miner.hotkey, "--json"]) == 0
    )
    report = json.loads(capsys.readouterr().out)["verdicts"]
    assert report[0]["verified"] and report[0]["validator"] == validator_client.hotkey
    assert report[0]["reasons"] == list(result.reasons)

    # an operator (or anyone with the file) who edits a verdict gets it shown as unverified
    line = json.loads(path.read_text())
    line["signed"]["body"] = line["signed"]["body"].replace('"ok":true', '"ok":false')
    path.write_text(json.dumps(line) + "\n")
    (edited,) = VerdictLog(path).read(miner.hotkey)
    assert edited.validator is None and not edited.request.ok
    assert miner_verdicts.main(["--miner.data_dir", str(path.parent), "--hotkey", miner.hotkey]) == 0
    assert "signature does not verify" in capsys.readouterr().out


async def test_a_miner_that_does_not_know_verdicts_costs_nothing(validator_client) -> None:
    gone = MinerTarget(1, validator_client.hotkey, "127.0.0.1:9")  # nobody listens there
    result = PogResult(1, 1, validator_client.hotkey, ok=True, sample=1.0)
    assert await tell_miners(validator_client, [result], {1: gone}) == 0
