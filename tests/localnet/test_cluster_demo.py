"""``localnet --cluster``: two hosts in network namespaces, their link proven, rented as a cluster, one
gloo training step across it; and the namespaces gone after a run, a Ctrl-C and a killed run.

Needs root and ``ip netns``: skipped with the reason otherwise, failed instead under
``COMPUTE_REQUIRE_NETNS=1`` (a machine that must run it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from localnetkit import REPO, localnet_summary
from netnskit import ctrl_c_once_made
from required import skip_unless_able

from compute.localnet import netns

pytestmark = pytest.mark.slow


def _netns_reason() -> str | None:
    reason = netns.unavailable()
    if reason is None:
        probe = f"{netns.PREFIX}probe{os.getpid()}"
        made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
        if made.returncode != 0:
            return f"`ip netns add` fails: {made.stderr.strip()}"
        subprocess.run(["ip", "netns", "delete", probe], check=False)
    return reason


@pytest.fixture(scope="module", autouse=True)
def namespaces_can_be_made() -> None:
    skip_unless_able(_netns_reason(), "COMPUTE_REQUIRE_NETNS", "localnet --cluster needs network namespaces")


def _ours(pid: int) -> list[str]:
    return [n for n in netns.namespaces() if n.startswith(f"{netns.PREFIX}{pid}-")]


def test_the_proven_link_carries_a_rented_clusters_training_step(tmp_path: Path) -> None:
    started = time.monotonic()
    summary = localnet_summary(tmp_path / "net", "--cluster", "--timeout", "150", timeout=200)
    elapsed = time.monotonic() - started
    link, cluster, train = summary["link"], summary["cluster"], summary["train"]
    assert summary["ok"] and summary["problems"] == [] and summary["mode"] == "cluster"
    hosts = link["hosts"]
    assert len(hosts) == 2 and all(h.startswith(netns.PREFIX) for h in hosts)
    assert link["passed"] and link["failures"] == [] and link["bandwidth_gbs"] > 0 and link["plain_gbs"] > 0
    # the proof's and the plain all-reduce's vectors crossed the hosts' link: S each way, twice
    assert link["link_counted_bytes"] >= 4 * link["vector_bytes"]
    # the renter proved the rented link itself (its key, its clock) before keeping the cluster, and
    # that proof's vector crossed the hosts' link too
    mine = summary["renter_link"]
    assert mine["passed"] and mine["bandwidth_gbs"] * 8 >= mine["min_link_gbps"] > 0, mine
    assert mine["link_counted_bytes"] >= 4 * mine["vector_bytes"]
    assert [n["rank"] for n in cluster["nodes"]] == [0, 1]
    assert {n["netns"] for n in cluster["nodes"]} == set(hosts)  # one node on each host
    assert cluster["master_addr"] == cluster["nodes"][0]["host"] and cluster["released"]
    assert all(n["host"].startswith("10.199.") for n in cluster["nodes"])
    assert train["world"] == 2 and train["matches_every_rank"] and train["allreduce_gbs"] > 0
    assert train["link_counted_bytes"] >= 2 * train["allreduce_bytes"]
    assert not set(hosts) & set(netns.namespaces())  # torn down
    print(f"localnet --cluster took {elapsed:.1f} s (demo's own {summary['elapsed_s']} s)")


def test_ctrl_c_during_the_demo_removes_its_namespaces(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "compute", "localnet", "--cluster", "--workdir", str(tmp_path / "net")],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # after 2 s the miners and the participants are starting inside them
    ctrl_c_once_made(proc, _ours, 2, 2.0, "the demo never made its namespaces")


def test_a_killed_runs_namespaces_are_removed_by_the_next(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs: a demo killed with SIGKILL
    stale = f"{netns.PREFIX}{gone.pid}-a"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    hosts = netns.Hosts()
    try:
        made = hosts.up()
        assert stale not in netns.namespaces()
        assert sorted(_ours(hosts.pid)) == sorted(h.netns for h in made)
    finally:
        hosts.down()
        subprocess.run(["ip", "netns", "delete", stale], capture_output=True, check=False)
    assert _ours(hosts.pid) == []
