"""``bench interconnect --link-gbit``: the proof and the plain all-reduce over a real, rate-limited link.

Each participant in its own network namespace, its egress held by ``tbf``: both figures must stay
under the shaped rate (a loopback run here reaches several times it, so a run that bypassed the
link would fail), the participants' counters must show the vector crossed, and no namespace of
the run may remain. Needs root, ``ip netns`` and ``tc``: skipped with the reason otherwise, failed
instead under ``COMPUTE_REQUIRE_NETNS=1`` (a machine that must run it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from netnskit import ctrl_c_once_made  # noqa: E402
from required import skip_unless_able  # noqa: E402

from compute.lab.bench import interconnect as bench  # noqa: E402
from compute.localnet import netns  # noqa: E402

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GBIT = 0.2  # 25 MB/s: an unshaped veth carries this run's 4 MiB at 70-115 MB/s here, loopback faster
BURST_TOLERANCE = 1.15  # the tbf burst (256 KiB) lets a short run beat the rate a little


@pytest.fixture(scope="module", autouse=True)
def links_can_be_shaped() -> None:
    skip_unless_able(
        netns.shaping_unavailable(), "COMPUTE_REQUIRE_NETNS", "--link-gbit needs namespaces and tc"
    )


def _ours(pid: int) -> list[str]:
    return [n for n in netns.namespaces() if n.startswith(f"{netns.SHAPED_PREFIX}{pid}-")]


def test_proof_and_plain_cross_the_shaped_link_and_the_namespaces_go() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "compute", "bench", "interconnect", "--link-gbit", str(GBIT),
         "--mib", "4", "--repeats", "1", "--json"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    figures = json.loads(out.splitlines()[-1])
    assert figures["mode"] == "shaped" and figures["world"] == 2
    (row,) = figures["rates"]
    assert row["link_gbit"] == GBIT and row["all_passed"]
    ceiling = GBIT / 8 * BURST_TOLERANCE
    assert 0 < row["proof_link_gbs"] <= ceiling and 0 < row["plain_link_gbs"] <= ceiling, row
    assert row["link_sent_mib"] >= row["link_mib"]  # each participant sent its share over its link
    assert row["verify_cpu_ms_per_link"] > 0
    assert _ours(proc.pid) == []


def test_ctrl_c_during_a_run_removes_its_namespaces() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compute",
            "bench",
            "interconnect",
            "--link-gbit",
            "0.1",
            "--mib",
            "64",
            "--json",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # after 3 s the participants are joining or all-reducing inside them
    ctrl_c_once_made(proc, _ours, 3, 3.0, "the bench never made its two hosts and their switch")


def test_bad_rates_cuda_and_no_root_are_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for args in (["--link-gbit", "0"], ["--link-gbit", "x"], ["--link-gbit", "1", "--device", "cuda"]):
        assert bench.main(args) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and "--link-gbit" in err, err
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert bench.main(["--link-gbit", "1"]) == 2
    assert capsys.readouterr().err == "bench interconnect --link-gbit: network namespaces need root\n"
