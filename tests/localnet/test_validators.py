"""Several validators in the demo: they test the same miners independently and agree under Yuma."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from localnetkit import REPO, run_localnet


@pytest.mark.soak
def test_validators_near_and_far_agree_on_miners_of_different_speeds(tmp_path: Path) -> None:
    """Miners at speeds 1.0 / 0.8 / 0.6 / 0.4, validators 0,
    150 and 300 ms away through the latency proxy; they must agree on the ranking: min cosine >=
    0.99, min Yuma trust >= 0.95, fastest / slowest weight >= 1.2, no honest failure. The miners'
    GEMMs are paced against a fixed reference (``--miner.pace_gflops``), not their share of the two
    busy cores, and every validator times runs of the same length (``--validator.min_timed_s``)."""
    args = ("--validators", "3", "--miners", "4", "--rounds", "3", "--latency-ms", "0,150,300", "--json")
    proc = run_localnet(tmp_path / "net", *args, timeout=900)
    assert proc.stdout.strip(), proc.stderr[-3000:]  # the demo crashed before its summary
    summary = json.loads(proc.stdout)
    # the demo fails on any problem: a failed honest miner, cosine < 0.99, trust < 0.95, spread < 1.2
    assert summary["problems"] == [], f"problems: {summary['problems']}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0
    consensus = summary["consensus"]
    names = [v["name"] for v in consensus["validators"]]
    assert names == ["validator", "validator2", "validator3"]
    assert [v["latency_ms"] for v in consensus["validators"]] == [0.0, 150.0, 300.0]
    stakes = [v["stake"] for v in consensus["validators"]]
    assert stakes[0] > stakes[1] > stakes[2] > 0  # their own stakes
    for validator in consensus["validators"]:
        assert validator["set_weights"]
        assert sum(validator["weights"].values()) == pytest.approx(1.0, abs=1e-3)
        assert validator["trust"] >= 0.95
    assert len(consensus["pairwise_cosine"]) == 3
    assert consensus["min_cosine"] >= 0.99
    assert consensus["honest_failures"] == []  # the far validators failed no honest miner
    assert consensus["miner_speeds"] == {"miner1": 1.0, "miner2": 0.8, "miner3": 0.6, "miner4": 0.4}
    assert consensus["weight_spread"] >= 1.2  # a ranking, not equality
    shares = {m["uid"]: m["consensus"] for m in consensus["miners"]}
    ranked = [shares[m["uid"]] for m in summary["miners"]]
    assert ranked == sorted(ranked, reverse=True)  # faster miners above slower ones
    assert sum(m["incentive"] for m in consensus["miners"]) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.slow
def test_validators_out_of_range_are_refused(tmp_path: Path) -> None:
    proc = run_localnet(tmp_path, "--validators", "0", timeout=60)
    assert proc.returncode == 2
    assert "--validators must be between 1 and 16" in proc.stderr


def test_demo_scoring_weighs_cpus_by_speed_and_floors_only_sustained(tmp_path: Path, monkeypatch) -> None:
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
    # the demo's ~0.005 TFLOPS CPUs are weighed by what they proved, not all at one floor
    assert table.cpu_fallback.weight(0.004) == pytest.approx(2 * table.cpu_fallback.weight(0.002))
    assert repo_table.cpu_fallback.weight(0.004) == repo_table.cpu_fallback.weight(0.002)  # before
    assert table.models == repo_table.models  # GPUs weigh as before


def test_reference_pacing_wherever_several_validators_score(tmp_path: Path) -> None:
    """--miner.pace_gflops goes to the miners whenever several validators score them, even at one
    speed (``localnet --collateral``: one honest miner and the killer, whose figures measured ~10 %
    apart unpaced, Yuma trust 0.91); the one-validator demo keeps its short runs."""
    from compute.localnet import LocalNet, Options
    from compute.localnet.network import Participant

    def net(validators: int, miners: int, speeds: tuple[float, ...] = ()) -> LocalNet:
        built = LocalNet(Options(workdir=tmp_path, validators=validators, miners=miners, speeds=speeds), REPO)
        built.validators = [Participant(f"v{i}", None, i) for i in range(validators)]  # type: ignore[arg-type]
        built.miners = [Participant(f"m{i}", None, 10 + i) for i in range(miners)]  # type: ignore[arg-type]
        return built

    assert net(3, 4).paced()
    assert not net(1, 4).paced()
    assert net(2, 1).paced()  # the collateral demo: one honest miner and the killer
    assert net(3, 4, speeds=(1.0,)).paced()


def test_demo_miners_differ_in_speed_by_default() -> None:
    from compute.localnet.network import spread_speeds

    assert spread_speeds(4) == (1.0, 0.8, 0.6, 0.4)
    assert spread_speeds(1) == (1.0,)


@pytest.mark.parametrize(
    ("flag", "value", "error"),
    [
        ("--latency-ms", "0,abc", "--latency-ms: expected comma-separated numbers"),
        ("--latency-ms", "-5", "--latency-ms: every value must be between 0 and 5000"),
        ("--speeds", "1,0", "--speeds: every value must be between 0.01 and 1"),
    ],
)
@pytest.mark.slow
def test_bad_speeds_or_latencies_are_refused(tmp_path: Path, flag: str, value: str, error: str) -> None:
    proc = run_localnet(tmp_path, flag, value, timeout=60)
    assert proc.returncode == 2 and error in proc.stderr
