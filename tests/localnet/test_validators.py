"""Several validators in the demo: they test the same miners independently and agree under Yuma."""

from __future__ import annotations

from pathlib import Path

import pytest
from localnetkit import REPO, localnet_summary, run_localnet


@pytest.mark.slow
def test_two_validators_agree_and_keep_their_consensus_trust(tmp_path: Path) -> None:
    args = ("--validators", "2", "--miners", "2", "--rounds", "1")
    consensus = localnet_summary(tmp_path / "net", *args, timeout=480)["consensus"]
    names = [v["name"] for v in consensus["validators"]]
    assert names == ["validator", "validator2"]
    stakes = [v["stake"] for v in consensus["validators"]]
    assert stakes[0] > stakes[1] > 0  # their own stakes
    for validator in consensus["validators"]:
        assert validator["set_weights"]
        assert sum(validator["weights"].values()) == pytest.approx(1.0, abs=1e-3)
        assert validator["trust"] >= 0.95
    assert [(p["a"], p["b"]) for p in consensus["pairwise_cosine"]] == [("validator", "validator2")]
    assert consensus["min_cosine"] >= 0.99
    assert sum(m["incentive"] for m in consensus["miners"]) == pytest.approx(1.0, abs=1e-3)


def test_validators_out_of_range_are_refused(tmp_path: Path) -> None:
    proc = run_localnet(tmp_path, "--validators", "0", timeout=60)
    assert proc.returncode == 2
    assert "--validators must be between 1 and 16" in proc.stderr


def test_demo_scoring_flattens_only_load_dependent_terms(tmp_path: Path, monkeypatch) -> None:
    from compute.localnet import LocalNet, Options
    from compute.scoring import load_gpu_table, load_holistic_config

    monkeypatch.delenv("COMPUTE_SCORING_CONFIG", raising=False)
    monkeypatch.delenv("COMPUTE_GPU_TABLE", raising=False)
    net = LocalNet(Options(workdir=tmp_path, validators=3), REPO)
    env = net.demo_scoring_env()
    demo = load_holistic_config(env["COMPUTE_SCORING_CONFIG"])
    repo = load_holistic_config(REPO / "config" / "scoring.yaml")
    assert demo.sustained.floor == 1.0
    assert demo.model_copy(update={"sustained": repo.sustained}) == repo  # nothing else changed
    table = load_gpu_table(env["COMPUTE_GPU_TABLE"])
    repo_table = load_gpu_table(REPO / "config" / "gpu_performance.yaml")
    assert (
        table.cpu_fallback.weight(0.01)
        == table.cpu_fallback.weight(0.03)
        == repo_table.cpu_fallback.min_weight
    )
    assert table.models == repo_table.models  # GPUs weigh as before
