"""``python -m compute miner-report`` shows the sample's terms a validator sent with its verdict
(the reason that starts ``terms: ``), in full, in its table and in ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

from bittensor import http_auth
from bittensor.sp_core import Keypair

from compute.miner import verdicts as miner_verdicts
from compute.miner.verdicts import FILE_NAME, VERDICT_PATH, VerdictLog
from compute.protocol import SignedRequest
from compute.scoring import explain, load_gpu_table
from compute.store import PogResult
from compute.transport import KeyWallet
from compute.validator.report.verdicts import verdict_of

VALIDATOR = Keypair.create_from_uri("//ReportValidator")
MINER = Keypair.create_from_uri("//ReportMiner")


def test_miner_report_shows_the_terms_of_each_sample(tmp_path: Path, capsys) -> None:
    result = PogResult(
        12,
        3,
        MINER.ss58_address,
        ok=True,
        sample=1.5,
        models=("H100 SXM",),
        gpu_count=1,
        tflops_fp16=513.0,
        tflops_fp32=46.3,
        mem_gbs=3350.0,
        mem_proven_gb=80.0,
        sustained_factor=0.6,
    )
    why = explain(result, table=load_gpu_table(), previous_score=1.0, presence_share=0.5)
    message = verdict_of(result, 1.15, why)
    body = message.model_dump_json()
    headers = http_auth.sign(
        KeyWallet(VALIDATOR),
        method="POST",
        path=VERDICT_PATH,
        body=body.encode(),
        receiver_ss58=MINER.ss58_address,
    )
    log = VerdictLog(tmp_path / FILE_NAME)
    log.record(SignedRequest(path=VERDICT_PATH, body=body, headers=headers), message, VALIDATOR.ss58_address)

    args = ["--miner.data_dir", str(tmp_path), "--hotkey", MINER.ss58_address]
    assert miner_verdicts.main([*args, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert row["verified"] and row["explanation"] == why.line()

    assert miner_verdicts.main(args) == 0
    shown = "".join(c for c in capsys.readouterr().out if not c.isspace() and c != "│")  # cells wrap
    for part in ("as H100 SXM", "sustained factor ×0.6", "score 1 → 1.15", "presence ×0.5"):
        assert part.replace(" ", "") in shown
