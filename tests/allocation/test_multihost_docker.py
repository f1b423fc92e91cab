"""Two real Docker hosts: this machine's engine and a second dockerd in its own network namespace,
reached over TCP with mutual TLS. Allocate on each and SSH in; kill the second host (daemon,
containerd, lease processes: a power cut); the miner keeps serving the first and reports the
second down; start it again and its lease comes back with the same host key and port.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import docker
import pytest
from allockit import RenterKey, ssh_run
from secondhost import IMAGE, SecondEngine

from compute.allocation import AllocationManager, LeaseStore
from compute.allocation.hosts.backend import MultiHostBackend, host_backend
from compute.allocation.hosts.check import docker_client
from compute.allocation.hosts.config import parse_hosts
from compute.allocation.lifecycle.hostwatch import check_and_recover
from compute.protocol import AllocateRequest, ErrorCode, RequestFailed, Requirements

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _request(key: RenterKey, host: str) -> AllocateRequest:
    return AllocateRequest(
        requirements=Requirements(host=host, cpu_count=1, memory_gb=0.25, disk_gb=1),
        duration_s=3600,
        ssh_public_key=key.public_line,
    )


async def _mark(info, key: RenterKey) -> str:  # noqa: ANN001 - a LeaseInfo
    """SSH into the lease and leave a fresh token in /tmp/probe; returns the token."""
    assert info.ssh is not None
    token = uuid.uuid4().hex
    done = await ssh_run(
        info.ssh.host, info.ssh.port, info.ssh.host_key, key, f"echo {token} > /tmp/probe", info.ssh.username
    )
    assert done.exit_status == 0, done.stderr
    return token


def _probe(engine: docker.DockerClient, lease_id: str) -> str:
    """The token the lease's container on ``engine`` holds (proves SSH reached that engine)."""
    (container,) = [c for c in engine.containers.list() if c.name.endswith(lease_id)]
    return container.exec_run(["cat", "/tmp/probe"]).output.decode().strip()


async def test_two_hosts_allocate_kill_and_recover(
    second_engine: SecondEngine, tmp_path: Path, make_wallet, renter_key: RenterKey
) -> None:
    miner_id = f"multihost-{uuid.uuid4().hex[:8]}"
    owner = make_wallet("renter").hotkey.ss58_address
    hosts = parse_hosts(
        {
            "hosts": [
                {
                    "name": "h1",
                    "endpoint": "unix:///var/run/docker.sock",
                    "ssh_host": "127.0.0.1",
                    "ssh_port_range": "45200-45299",
                    "isolate": False,
                },
                second_engine.hosts_entry("h2", "45300-45399"),
            ]
        }
    )
    store = LeaseStore(tmp_path / "leases.db")

    def host_of(lease_id: str) -> str | None:
        lease = store.get(lease_id)
        return None if lease is None else lease.record.host

    backend = MultiHostBackend(hosts, host_of, lambda c: host_backend(c, miner_id, IMAGE), IMAGE)
    manager = AllocationManager(store, backend, [], placement=backend)
    engine1, engine2 = docker.from_env(), docker_client(hosts[1])
    try:
        assert await check_and_recover(backend, manager) == {"h1": True, "h2": True}
        on1 = await manager.allocate(owner, _request(renter_key, "h1"))
        on2 = await manager.allocate(owner, _request(renter_key, "h2"))
        assert (on1.host, on2.host) == ("h1", "h2")
        assert on2.ssh is not None and on2.ssh.host == second_engine.env["ADDRESS"]  # type: ignore[index]
        # each lease is a container on its own engine, and SSH reaches it there
        label = {"label": f"compute.miner={miner_id}"}
        assert len(engine1.containers.list(filters=label)) == 1
        assert len(engine2.containers.list(filters=label)) == 1
        assert await _mark(on1, renter_key) == _probe(engine1, on1.lease_id)
        assert await _mark(on2, renter_key) == _probe(engine2, on2.lease_id)

        second_engine.stop()  # host 2 loses power
        status = await check_and_recover(backend, manager)
        assert status == {"h1": True, "h2": False}
        down = {h.name: h for h in backend.host_specs()}
        assert not down["h2"].up and down["h2"].reason and down["h1"].up
        with pytest.raises(RequestFailed) as refused:
            await manager.allocate(owner, _request(renter_key, "h2"))
        assert refused.value.code == ErrorCode.NO_CAPACITY and "h2" in refused.value.reason
        again = await manager.allocate(owner, _request(renter_key, "h1"))  # host 1 keeps serving
        assert await _mark(again, renter_key) == _probe(engine1, again.lease_id)
        assert await _mark(on1, renter_key) == _probe(engine1, on1.lease_id)
        await manager.deallocate(owner, again.lease_id)

        second_engine.start()  # power back: the miner's next check brings its lease back
        assert await check_and_recover(backend, manager) == {"h1": True, "h2": True}
        back = await manager.status(owner, on2.lease_id)
        assert back.ssh is not None and on2.ssh is not None
        assert (back.ssh.port, back.ssh.host_key) == (on2.ssh.port, on2.ssh.host_key)
        token = await _mark(back, renter_key)
        engine2.close()
        engine2 = docker_client(hosts[1])  # the old connection died with the daemon
        assert _probe(engine2, on2.lease_id) == token

        for lease in (on1, on2):
            await manager.deallocate(owner, lease.lease_id)
        assert not engine1.containers.list(all=True, filters=label)
        assert not engine2.containers.list(all=True, filters=label)
    finally:
        for container in engine1.containers.list(all=True, filters={"label": f"compute.miner={miner_id}"}):
            container.remove(force=True)
        engine1.close()
        engine2.close()
        await backend.close()
        store.close()
