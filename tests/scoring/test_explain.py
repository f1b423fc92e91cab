"""The explanation of a round sample: its terms multiply back to the stored sample, and every zero says why."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from compute.scoring import (
    HolisticConfig,
    HostEvidence,
    ProvenGpu,
    ScoringConfig,
    gpu_credit,
    holistic_score,
    load_gpu_table,
    value_shape,
)
from compute.scoring.explain import EmaStep, explain
from compute.store import PogResult

TABLE = load_gpu_table()
HOLISTIC = HolisticConfig()
HOST = {"cpu_cores": 32.0, "cpu_gbs": 10.0, "ram_gb": 256.0, "disk_gb": 500.0}


def h100_result(**extra) -> PogResult:
    """Two H100 SXM proving their table figures, sustained x0.8, the sample as the validator builds it."""
    proven = ProvenGpu(513.0, 46.3, 80.0, 3350.0)
    credit = gpu_credit(proven, TABLE, value_shape(HOLISTIC)).value
    score = holistic_score([credit, credit], HostEvidence(**HOST), rented=False, sustained_factor=0.8)
    fields = dict(
        ok=True,
        sample=score.total * 0.75,  # availability x0.75 (canary rentals)
        models=("H100 SXM",) * 2,
        tflops_fp16=513.0,
        tflops_fp32=46.3,
        gpu_count=2,
        credited_gpus=2,
        mem_gbs=3350.0,
        mem_proven_gb=80.0,
        sustained_factor=0.8,
        host=HOST,
        availability=0.75,
        rental_uptime=1.0,
    )
    fields.update(extra)
    return PogResult(7, 3, "hk-three", **fields)  # type: ignore[arg-type]


def product(ex) -> float:
    factors = [ex.per_gpu, ex.gpus]
    factors += [
        f
        for f in (
            ex.host_factor,
            ex.sustained_factor,
            ex.rented_fraction,
            ex.availability,
            ex.rental_uptime,
        )
        if f is not None
    ]
    if ex.kind == "rented":
        factors.append(ex.rented_bonus)
    return math.prod(factors)


def test_verified_h100_terms_multiply_back_to_the_sample() -> None:
    result = h100_result()
    ex = explain(result, table=TABLE, holistic=HOLISTIC, previous_score=2.0)
    expected_credit = gpu_credit(ProvenGpu(513.0, 46.3, 80.0, 3350.0), TABLE, value_shape(HOLISTIC)).value
    assert ex.kind == "verified"
    assert ex.credited_as == "H100 SXM"
    assert ex.per_gpu == pytest.approx(expected_credit)
    assert ex.sustained_factor == 0.8
    assert ex.host_factor == pytest.approx(1 + 0.04 * 0.5 + 0.03 * 0.5 + 0.04 * 0.5 + 0.04 * 0.5)
    assert product(ex) == pytest.approx(result.sample)
    assert ex.zero_reason is None
    assert ex.ema == EmaStep(2.0, 0.3, result.sample, pytest.approx(0.3 * result.sample + 0.7 * 2.0))


def test_failed_round_names_its_first_reason_as_the_zero() -> None:
    result = h100_result(ok=False, sample=0.0, reasons=("fp16 product mismatch", "second"))
    ex = explain(result, table=TABLE, previous_score=1.0)
    assert (ex.kind, ex.zero_reason, ex.per_gpu) == ("failed", "fp16 product mismatch", None)
    assert ex.ema is not None and ex.ema.new == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"reasons": ("shared device: credited once, on another miner",)}, "shared device"),
        ({"availability": 0.0}, "availability 0"),
        ({"rental_uptime": 0.0}, "rental uptime 0"),
        ({"tflops_fp16": 0.0, "tflops_fp32": 0.0}, "no GPU credited"),
    ],
)
def test_a_passed_round_with_a_zero_sample_says_why(change: dict, reason: str) -> None:
    ex = explain(h100_result(sample=0.0, **change), table=TABLE)
    assert ex.zero_reason is not None and ex.zero_reason.startswith(reason)


def test_rented_machine_shows_its_bonus_and_fraction() -> None:
    bonus = ScoringConfig(rented_bonus=0.2)
    result = h100_result(rented=True, rented_fraction=0.5, sample=3.0 * 1.2 * 0.5 * 0.75)
    ex = explain(result, table=TABLE, scoring=bonus)
    assert (ex.kind, ex.rented_bonus, ex.rented_fraction, ex.credited_as) == ("rented", 1.2, 0.5, "H100 SXM")
    assert ex.per_gpu == pytest.approx(1.5)
    assert product(ex) == pytest.approx(result.sample)


def test_history_reset_starts_the_average_again() -> None:
    ex = explain(h100_result(history_reset=True), table=TABLE, previous_score=9.0)
    assert ex.ema is not None and ex.ema.previous is None and ex.ema.new == pytest.approx(ex.sample)
    assert "history restarts" in ex.line()


def test_line_is_one_line_with_credit_when_share_and_collateral_are_known() -> None:
    ex = explain(
        h100_result(),
        table=TABLE,
        previous_score=2.0,
        new_score=2.5,
        presence_share=0.5,
        collateral_factor=0.4,
    )
    line = ex.line()
    assert "\n" not in line
    assert ex.credit == pytest.approx(2.5 * 0.5 * 0.4)
    for part in ("as H100 SXM", "host factor ×", "sustained factor ×0.8", "availability ×0.75", "credit 0.5"):
        assert part in line


def test_credit_zero_when_absent_from_presence_checks() -> None:
    ex = explain(h100_result(), table=TABLE, new_score=2.0, presence_share=0.0)
    assert ex.credit == 0.0


def test_without_a_table_the_identified_model_is_named() -> None:
    ex = explain(replace(h100_result(), models=("NVIDIA H100 80GB HBM3",) * 2))
    assert ex.credited_as == "NVIDIA H100 80GB HBM3"


def test_credit_zero_says_why_when_the_sample_is_positive() -> None:
    ex = explain(h100_result(), table=TABLE, new_score=2.0, presence_share=0.0)
    assert ex.zero_reason is None
    assert ex.why_zero() == "credit 0: absent at every presence check in the window"
    assert "zero: credit 0: absent" in ex.line()


def test_partly_rented_pays_its_rented_gpus_beside_the_free_ones() -> None:
    """One free GPU proven, one in a verified lease credited as much x (1 + bonus): 2 GPUs paid."""
    scoring = ScoringConfig(rented_bonus=0.1)
    free = h100_result(gpu_count=1, credited_gpus=1, availability=1.0)
    each = free.sample  # the free GPU's sample (one GPU)
    result = replace(free, sample=each + each * 1.1, rented_fraction=0.5)
    ex = explain(result, table=TABLE, holistic=HOLISTIC, scoring=scoring)
    assert (ex.kind, ex.gpus, ex.rented_gpus, ex.rented_bonus) == ("partly rented", 2, 1, 1.1)
    assert ex.per_gpu == pytest.approx(explain(free, table=TABLE).per_gpu)
    assert "rented bonus ×1.1 on 1 rented GPU(s)" in ex.line() and "rented fraction" not in ex.line()
