"""Lease health on real Docker: a killed lease container is noticed, restarted with the same host
key (the renter's pinned ssh command still works), and the renter sees status and restart count in
``register.py list --refresh``; a lease that stays down past the threshold is reported as lost."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from flow import renter_key, ssh

from compute.allocation.lifecycle.health import HealthMonitor
from compute.operator import EXIT_OK, main

pytestmark = pytest.mark.docker


def lease_container(lease_id: str):
    import docker

    (container,) = docker.from_env().containers.list(all=True, filters={"name": lease_id})
    return container


def refreshed(net) -> dict:
    code, body = net.cli("operator_a", "list", "--refresh")
    assert code == EXIT_OK, body
    return {lease["lease_id"]: lease for lease in body["leases"]}


def test_a_killed_lease_is_restarted_with_its_host_key_and_the_renter_sees_it(
    start_docker_subnet, tmp_path: Path, monkeypatch
) -> None:
    net = start_docker_subnet()
    pub = renter_key(tmp_path / "keys")
    code, body = net.cli("operator_a", "allocate", "--ssh-key", str(pub))
    assert code == EXIT_OK, body
    lease, command = body["lease"]["lease_id"], body["ssh_command"]
    assert ssh(command, "echo before").stdout.strip() == "before"
    health = asyncio.run(net.monitor.check_once())
    assert (health[lease].status, health[lease].restarts) == ("up", 0)

    lease_container(lease).kill()
    health = asyncio.run(net.monitor.check_once())
    assert (health[lease].status, health[lease].restarts) == ("up", 1)
    assert lease_container(lease).status == "running"
    assert ssh(command, "echo after").stdout.strip() == "after"  # StrictHostKeyChecking: same host key

    listed = refreshed(net)[lease]
    assert listed["state"] == "active" and listed["health"]["status"] == "up"
    assert listed["health"]["restarts"] == 1
    monkeypatch.setenv("COLUMNS", "250")
    out = io.StringIO()
    assert main([*net.flags("operator_a"), "list", "--refresh"], stdout=out) == EXIT_OK
    assert "up, 1 restart(s)" in out.getvalue()


def test_a_lease_down_past_the_threshold_is_reported_lost_not_dropped(
    start_docker_subnet, tmp_path: Path, monkeypatch
) -> None:
    net = start_docker_subnet()
    code, body = net.cli("operator_a", "allocate", "--ssh-key", str(renter_key(tmp_path / "keys")))
    assert code == EXIT_OK, body
    lease = body["lease"]["lease_id"]

    async def sshd_never_answers(host: str, port: int) -> bool:  # e.g. a broken sshd inside the image
        return False

    assert net.monitor is not None
    watch = HealthMonitor(net.monitor.manager, lost_after_s=0.0, probe=sshd_never_answers)
    net.monitor._health = watch._health  # the miner app reports what this watch found
    health = asyncio.run(watch.check_once())
    assert health[lease].status == "lost" and health[lease].reason == "sshd not answering"
    assert health[lease].down_since is not None and health[lease].restarts == 1  # it was retried
    health = asyncio.run(watch.check_once())
    assert health[lease].status == "lost" and health[lease].restarts == 2  # still retried, not dropped

    listed = refreshed(net)[lease]
    assert listed["state"] == "active" and listed["health"]["status"] == "lost"
    monkeypatch.setenv("COLUMNS", "250")
    out = io.StringIO()
    assert main([*net.flags("operator_a"), "list", "--refresh"], stdout=out) == EXIT_OK
    assert "reported lost by its miner" in out.getvalue()
