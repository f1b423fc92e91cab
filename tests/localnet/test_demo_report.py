"""The demo tells the truth: failures show in the exit code and the summary, runs start fresh,
the Docker demo picks an image that works on this host, and every figure has a legend."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from localnetkit import REPO, run_localnet
from rich.console import Console

from compute.localnet import LocalNet, Options
from compute.localnet.report import render_summary, summary_problems


def _summary(*verdicts: str, weights: dict[str, float] | None = None, rounds: int = 1) -> dict:
    miners = [
        {
            "name": f"miner{i + 1}",
            "uid": i + 1,
            "hotkey": "5F" + "x" * 46,
            "verdict": verdict,
            "reasons": [] if verdict == "verified" else ["ssh: lease container did not start"],
            "device": "CPU" if verdict == "verified" else None,
            "tflops_fp16": 0.1,
            "tflops_fp32": 0.2,
            "memory_gbs": 3.0,
            "sustained_ratio": 1.35 if i == 0 else 0.54,
            "sustained_factor": 1.0 if i == 0 else 0.6,
            "score": 0.5,
            "weight": 0.5,
        }
        for i, verdict in enumerate(verdicts)
    ]
    return {
        "netuid": 27,
        "chain": "/tmp/chain.db",
        "validator": {"uid": 0, "hotkey": "5V"},
        "rounds": rounds,
        "block": 9,
        "miners": miners,
        "weights_on_chain": {"1": 1.0} if weights is None else weights,
    }


def _render(summary: dict) -> str:  # whitespace-normalised, as a person reads it
    out = io.StringIO()
    summary["problems"] = summary_problems(summary, 1)
    render_summary(summary, Console(file=out, width=200))
    return " ".join(out.getvalue().split())


def test_a_failed_miner_is_a_problem_named_in_the_summary() -> None:
    summary = _summary("verified", "failed")
    assert summary_problems(summary, 1) == ["miner2 (uid 2) failed: ssh: lease container did not start"]
    text = _render(summary)
    assert "FAILED miner2 (uid 2) failed: ssh: lease container did not start" in text
    assert "demo failed (1 problem(s))" in text and "demo OK" not in text


def test_missing_rounds_and_missing_weights_are_problems() -> None:
    summary = _summary("verified", weights={}, rounds=0)
    problems = summary_problems(summary, 2)
    assert "the validator finished 0 of 2 round(s)" in problems
    assert "no weights were written on chain" in problems
    assert "set NO weights" in _render(summary)


@pytest.mark.parametrize(
    ("name", "verdict", "availability", "rounds", "problem"),
    [
        (
            "canary-aware",
            "verified",
            1.0,
            2,
            "canary-aware (uid 1) kept full availability while refusing renters",
        ),
        ("canary-aware", "verified", 2 / 3, 2, None),
        ("canary-aware", "verified", 1.0, 1, None),  # one round: it may have met only the served signer
        (
            "self-renter",
            "rented (verified lease)",
            1.0,
            2,
            "self-renter (uid 1) was credited a rental to its own coldkey",
        ),
        ("self-renter", "self-rental: its own coldkey's lease is no rental", 0.5, 2, None),
    ],
)
def test_a_cheater_earning_its_devices_full_share_fails_the_demo(
    name: str, verdict: str, availability: float, rounds: int, problem: str | None
) -> None:
    summary = _summary(verdict, rounds=rounds)
    summary["miners"][0].update(name=name, role="cheater", availability=availability)
    assert summary_problems(summary, rounds) == ([problem] if problem else [])


@pytest.mark.parametrize(
    ("credits", "problem"),
    [
        ((0.5, 0.5, 0.0), None),  # one device, present behind a different hotkey at each check
        ((1.0, 0.0, 0.0), None),
        ((1.0, 1.0, 0.0), "the 3 sybils on one device earned 2, more than the device's 1"),
    ],
)
def test_sybils_on_one_device_earn_together_at_most_that_device(credits, problem) -> None:
    summary = _summary("verified", "verified", "verified", rounds=2)
    for i, (miner, credit) in enumerate(zip(summary["miners"], credits, strict=True)):
        miner.update(name=f"sybil-{'abc'[i]}", role="cheater", capacity=1.0, credit=credit)
    assert summary_problems(summary, 2) == ([problem] if problem else [])


def test_one_device_as_many_hosts_and_a_hit_and_run_fail_the_demo_when_overpaid() -> None:
    summary = _summary("verified", "verified", rounds=2)
    summary["presence_checks"] = 2
    summary["miners"][0].update(name="hosts-dup", role="cheater", credited_hosts=2, capacity=1.0, credit=1.0)
    summary["miners"][1].update(
        name="hit-and-run", role="cheater", credited_hosts=0, capacity=1.0, credit=0.9
    )
    assert summary_problems(summary, 2) == [
        "hosts-dup (uid 1): one device credited as 2 hosts",
        "hit-and-run (uid 2) earned 0.9, more than its device for 50% of the checks (0.5)",
    ]
    summary["miners"][0]["credited_hosts"] = 1
    summary["miners"][1]["credit"] = 0.35  # score 0.7 (absent at its second test) x share 1/2
    assert summary_problems(summary, 2) == []


def test_an_all_verified_demo_is_ok_and_every_figure_has_a_legend() -> None:
    text = _render(_summary("verified", "verified"))
    assert "demo OK" in text and "FAILED" not in text
    assert "throttled ×0.60" in text  # the factor the score is multiplied by …
    assert "multiplied by the factor shown" in text  # … and the legend that says so
    assert "above 1 the run sped up" in text  # sustained ratios > 1 explained


def test_a_rerun_starts_fresh_and_removes_only_what_the_demo_made(tmp_path: Path) -> None:
    work = tmp_path / "net"
    for name in ("validator", "miner1", "miner12", "wallets", "logs", "mine", "minerals"):
        (work / name).mkdir(parents=True)
        (work / name / "state").write_text("old")
    (work / "chain.db").write_text("old chain")
    (work / "notes.txt").write_text("keep me")
    net = LocalNet(Options(workdir=work), REPO)
    removed = net.clear_previous_run()
    assert removed == ["logs", "miner1", "miner12", "validator", "wallets"]
    assert sorted(p.name for p in work.iterdir()) == ["mine", "minerals", "notes.txt"]


@pytest.mark.docker
def test_the_docker_demo_refuses_the_cuda_image_on_a_host_without_the_nvidia_runtime(tmp_path: Path) -> None:
    from compute.specs import collect_docker

    docker = collect_docker(5.0)
    if not docker.available:
        pytest.skip(f"no Docker engine: {docker.error}")
    if docker.nvidia_runtime:
        pytest.skip("this engine has the nvidia runtime")
    proc = run_localnet(
        tmp_path / "net", "--backend", "docker", "--base-image", "compute-base:cuda", timeout=120
    )
    assert proc.returncode == 1
    assert "needs the NVIDIA container runtime" in proc.stderr and "compute-base:cpu" in proc.stderr
    assert not (tmp_path / "net" / "chain.db").exists()  # refused before anything started


@pytest.mark.docker
@pytest.mark.slow
def test_the_docker_demo_on_this_cpu_host_picks_an_image_that_works(tmp_path: Path) -> None:
    from compute.specs import collect_docker

    docker = collect_docker(5.0)
    if not docker.available:
        if os.environ.get("COMPUTE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"COMPUTE_REQUIRE_DOCKER=1 but {docker.error}")
        pytest.skip(f"no Docker engine: {docker.error}")
    proc = run_localnet(tmp_path / "net", "--backend", "docker", "--miners", "1", "--json", timeout=300)
    expected = "compute-base:cuda" if docker.nvidia_runtime else "compute-base:cpu"
    assert f"lease image {expected}" in proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["ok"] and summary["problems"] == []
    assert [m["verdict"] for m in summary["miners"]] == ["verified"]


def test_failing_cheaters_of_the_cheater_scenario_are_not_problems() -> None:
    summary = _summary("verified", "failed")
    summary["miners"][1]["role"] = "cheater"
    summary["miners"][0]["verdict"] = "verified (device credited once)"
    assert summary_problems(summary, 1) == []
