"""The round's explanations reach the scoreboard (under the round table) and the verdict a miner
receives (its first reason), each the same one line as ``compute.scoring.explain`` gives."""

from __future__ import annotations

import io

from rich.console import Console

from compute.protocol import VerdictRequest
from compute.scoring import HolisticConfig, ScoringConfig, load_gpu_table
from compute.store import PogResult, ScoreRecord
from compute.validator.report.explained import explain_round
from compute.validator.report.table import print_round_table, round_table
from compute.validator.report.verdicts import EXPLAINED, verdict_of

OK = PogResult(
    4,
    7,
    "hk-seven",
    ok=True,
    sample=2.0,
    models=("H100 SXM",),
    tflops_fp16=513.0,
    tflops_fp32=46.3,
    gpu_count=1,
    mem_gbs=3350.0,
    mem_proven_gb=80.0,
    sustained_factor=0.5,
    availability=1.0,
    rental_uptime=1.0,
)
FAILED = PogResult(4, 9, "hk-nine", ok=False, sample=0.0, reasons=("[red]fp16 product mismatch",))


def explained() -> dict:
    return explain_round(
        [OK, FAILED],
        {7: ScoreRecord(7, "hk-seven", 1.0, 0.0), 9: ScoreRecord(9, "hk-nine", 0.5, 0.0)},
        {7: ScoreRecord(7, "hk-seven", 1.3, 0.0), 9: ScoreRecord(9, "hk-nine", 0.35, 0.0)},
        table=load_gpu_table(),
        holistic=HolisticConfig(),
        scoring=ScoringConfig(),
        shares={"hk-seven": 0.75},
        factors={7: 0.5},
    )


def test_scoreboard_prints_each_miners_terms_under_the_round_table() -> None:
    out = io.StringIO()
    table = round_table(4, [OK, FAILED], {7: 1.3, 9: 0.35}, {7: 1.0})
    print_round_table(table, Console(file=out, width=400, color_system=None), explanations=explained())
    text = out.getvalue()
    assert "why each sample" in text
    seven = next(line for line in text.splitlines() if "uid 7 r4 verified" in line)
    for part in (
        "as H100 SXM",
        "sustained factor ×0.5",
        "score 1 → 1.3",
        "presence ×0.75",
        "collateral ×0.5",
    ):
        assert part in seven
    nine = next(line for line in text.splitlines() if "uid 9 r4 failed" in line)
    assert "zero: [red]fp16 product mismatch" in nine  # the miner's text shown, never read as markup
    assert "presence ×0" in nine  # a hotkey without a share has none


def test_the_verdict_carries_the_explanation_as_its_first_reason() -> None:
    why = explained()
    message = verdict_of(FAILED, 0.35, why[9])
    assert VerdictRequest.model_validate_json(message.model_dump_json()) == message
    assert message.reasons[0] == EXPLAINED + why[9].line()
    assert message.reasons[1:] == list(FAILED.reasons)
    assert verdict_of(FAILED, 0.35).reasons == list(FAILED.reasons)  # none: as before
