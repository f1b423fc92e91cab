"""``presence-sim``: the production schedule through the validator's own schedule and credit code.

A short horizon keeps it fast; the full figures (14 days, 8 and 64 validators) are in
docs/benchmarks.md, printed by ``python -m compute bench presence-sim``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compute.lab.sim.presence import Schedule, hit_and_run, pool_multiple, report

REPO = Path(__file__).resolve().parents[2]
SCHEDULE = Schedule(canary_s=4.5)


def test_one_device_behind_many_hotkeys_earns_one_device_and_the_snapshot_design_paid_it_k_times() -> None:
    for hotkeys in (1, 4, 12):
        for strategy in ("fixed", "rotate-1h"):
            assert pool_multiple(SCHEDULE, 8, hotkeys, strategy, 3.0, 0) <= 1.0 + 1e-9
        # the control: credited its score alone (the design before presence), the pool earns k devices
        assert pool_multiple(SCHEDULE, 8, hotkeys, "fixed", 3.0, 0, snapshot=True) == pytest.approx(hotkeys)


def test_hit_and_run_earns_no_more_per_gpu_hour_than_an_honest_device() -> None:
    for share in (0.02, 0.1):
        assert hit_and_run(SCHEDULE, 8, share, 4.0, 0) <= 1.05
    assert hit_and_run(SCHEDULE, 8, 0.02, 4.0, 0, snapshot=True) > 1.05  # what presence stops


def test_report_holds_every_target_and_the_load_stays_in_the_budget() -> None:
    result = report(SCHEDULE, validators=(8, 64), hotkeys=(1, 3), presence=(0.05,), days=2.0, seeds=1)
    assert result["ok"], result
    for row in result["rows"]:
        assert row["load"]["total"] <= 0.05 + 1e-9
        assert row["best_multiple"] <= 1.05 and row["worst_per_gpu_hour"] <= 1.05


@pytest.mark.slow
def test_cli_prints_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "compute", "bench", "presence-sim", "--json", "--days", "1", "--seeds", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [row["validators"] for row in result["rows"]] == [8, 64] and result["ok"]
    bad = subprocess.run(
        [sys.executable, "-m", "compute", "bench", "presence-sim", "--validators", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--validators" in bad.stderr
