"""kill -9 at every step of allocate and release, then restart: no ghost, no orphan, every restart works."""

from __future__ import annotations

import os

import pytest
from portspace import OFFSET

from compute.lab.harness.crashloop import STEPS, run_crash_loop

BASE = OFFSET + 46200 + os.getpid() % 50 * 10


@pytest.mark.slow
def test_one_kill_at_each_step_loses_nothing(tmp_path):
    report = run_crash_loop(tmp_path, iterations=1, port_range=(BASE, BASE + 9))
    assert report.runs == report.kills == len(STEPS)  # the child really died at every step
    assert (report.ghost_leases, report.orphans, report.failed_restarts) == (0, 0, 0)


@pytest.mark.soak  # a long kill -9 loop (45 s in CI): scripts/soak.sh; one cycle above runs everywhere
@pytest.mark.timeout(900)
def test_twenty_kills_at_each_step_lose_nothing(tmp_path):
    report = run_crash_loop(tmp_path, iterations=20, port_range=(BASE, BASE + 9))
    assert report.runs == report.kills == 20 * len(STEPS)
    assert (report.ghost_leases, report.orphans, report.failed_restarts) == (0, 0, 0)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(900)
def test_kills_with_docker_leave_no_orphan_container(tmp_path):
    report = run_crash_loop(tmp_path, iterations=2, kind="docker", port_range=(BASE, BASE + 9))
    assert report.runs == report.kills == 2 * len(STEPS)
    assert (report.ghost_leases, report.orphans, report.failed_restarts) == (0, 0, 0)
