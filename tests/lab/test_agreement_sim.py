"""The agreement simulation: honest validators agree at the modelled noise for GPU-sized work, and
the model is sharp enough to tell good designs from bad ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compute.lab.sim.agreement import NOISES, Design, credit_sensitivity, load_table, simulate

REPO = Path(__file__).resolve().parents[2]
MODELLED = next(n for n in NOISES if n.name == "modelled")


def test_no_noise_means_perfect_agreement() -> None:
    result = simulate(NOISES[0], Design("d", 3.0, 0.3), validators=6, miners=12, rounds=5)
    assert result.min_cosine == pytest.approx(1.0) and result.min_trust == pytest.approx(1.0)


def test_gpu_sized_work_agrees_at_the_modelled_noise() -> None:
    result = simulate(MODELLED, Design("default", 3.0, 0.3), validators=16, miners=32, rounds=20)
    assert result.min_cosine >= 0.99
    assert result.min_trust >= 0.95


def test_latency_bound_work_agrees_worse_than_gpu_sized_work() -> None:
    short = simulate(MODELLED, Design("short", 0.5), validators=16, miners=32, rounds=5)
    long = simulate(MODELLED, Design("long", 10.0), validators=16, miners=32, rounds=5)
    assert short.min_trust < long.min_trust - 0.02
    assert short.min_cosine < long.min_cosine


def test_latency_dominates_short_proofs_and_thermal_long_ones() -> None:
    rows = {row["source"]: row for row in credit_sensitivity(samples=2048)}
    latency, thermal = rows["latency 10-200 ms"], rows["thermal +-5 %"]
    assert latency["0.5s_std_pct"] > thermal["0.5s_std_pct"]
    assert latency["10s_std_pct"] < thermal["10s_std_pct"]
    assert latency["10s_std_pct"] < latency["3s_std_pct"] < latency["0.5s_std_pct"]


def test_load_budget_keeps_64_validators_under_five_percent() -> None:
    rows = {row["validators"]: row for row in load_table(4320.0, 30.0, 0.05)}
    assert rows[1]["load_budgeted"] == pytest.approx(30 / 4320, abs=1e-4)
    assert rows[64]["load_every_round"] > 0.4
    assert rows[64]["load_budgeted"] <= 0.05
    assert rows[64]["tests_per_round"] >= 1  # every miner is still proven several times a round


@pytest.mark.slow
def test_command_prints_both_tables_as_json() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "compute",
            "bench",
            "agreement-sim",
            "--json",
            "--validators",
            "4",
            "--miners",
            "8",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {row["noise"] for row in report["agreement"]} == {"none", "modelled", "harsh"}
    assert [row["validators"] for row in report["load"]["rows"]] == [1, 16, 64]
    bad = subprocess.run(
        [sys.executable, "-m", "compute", "bench", "agreement-sim", "--validators", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--validators must be" in bad.stderr


@pytest.mark.slow
def test_check_cost_times_the_shipped_worker(tmp_path: Path) -> None:
    # Tiny challenges on the CPU: the figures are real timings of the worker the validator ships.
    from compute.lab.bench.check_cost import make_plan, run_plan, script

    plan = make_plan("L4", target_seconds=1e-4, m=64, p=64)
    assert [step["precision"] for step in plan["steps"]] == ["fp16", "fp16", "fp32", "fp32"]  # best of two
    figures = run_plan(plan, "cpu")
    assert figures["startup_s"] > 0 and figures["fp16_commit_s"] > 0 and figures["fp32_open_s"] >= 0
    assert figures["total_s"] >= figures["startup_s"] + figures["fp16_commit_s"]
    assert figures["devices"] == ["cpu"]
    with pytest.raises(ValueError, match="unknown GPU"):
        make_plan("Voodoo 5")
    assert script(["nonsense"]) == 2
