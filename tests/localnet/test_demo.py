"""The README's main command, run for real: chain, miner and validator processes, weights on chain."""

from __future__ import annotations

from pathlib import Path

import pytest
from localnetkit import localnet_summary, run_localnet


@pytest.mark.slow
def test_demo_verifies_every_honest_miner_and_writes_their_weights(tmp_path: Path) -> None:
    summary = localnet_summary(tmp_path / "net", "--miners", "2", "--rounds", "1", timeout=240)
    assert summary["rounds"] == 1
    assert summary["ok"] and summary["problems"] == []
    assert [m["verdict"] for m in summary["miners"]] == ["verified", "verified"]
    for miner in summary["miners"]:
        assert miner["device"] == "CPU"
        assert miner["tflops_fp32"] > 0
        assert miner["score"] > 0
        assert miner["weight"] > 0
        assert miner["memory_gbs"] > 0  # the memory proof ran and passed both judges
    assert sum(summary["weights_on_chain"].values()) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.slow
def test_demo_refuses_bad_arguments_with_a_clear_message(tmp_path: Path) -> None:
    proc = run_localnet(tmp_path, "--miners", "0", timeout=60)
    assert proc.returncode == 2
    assert "--miners must be between 1 and 64" in proc.stderr
