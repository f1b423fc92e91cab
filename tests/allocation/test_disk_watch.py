"""A Docker lease that writes past its ``disk_gb`` is stopped where the driver cannot enforce it.

On overlay2 over ext4 (this machine's engine) ``--storage-opt size`` is refused, so before a lease
asked for 1 GB wrote 2 GB. Here a real lease container (real SSH, the real manager and store) writes
1.3 GiB into its own filesystem: the disk watch measures its layer and ends the lease (``expired``),
its container gone; a lease that stays within its size is left alone.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncssh
import pytest
from test_docker_backend import IMAGE, client_key, docker_ready, public_line

from compute.allocation import AllocationManager, LeaseStore
from compute.allocation.docker.backend import DockerBackend
from compute.allocation.lifecycle.diskwatch import DiskWatch
from compute.protocol import AllocateRequest, Requirements

__all__ = ["docker_ready"]
pytestmark = pytest.mark.docker
OWNER = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


async def _run(ssh, key: asyncssh.SSHKey, command: str) -> asyncssh.SSHCompletedProcess:  # noqa: ANN001
    async with asyncssh.connect(
        ssh.host, ssh.port, username=ssh.username, client_keys=[key], agent_path=None, config=None,
        known_hosts=([asyncssh.import_public_key(ssh.host_key)], [], []), connect_timeout=20,
    ) as conn:  # fmt: skip
        return await conn.run(command, timeout=300)


async def test_a_lease_writing_past_its_disk_size_is_stopped(docker_ready: None, tmp_path: Path) -> None:
    prefix = f"test-disk-{uuid.uuid4().hex[:6]}"
    backend = DockerBackend(image=IMAGE, name_prefix=prefix, miner_id=prefix, isolate=False)
    manager = AllocationManager(LeaseStore(tmp_path / "leases.db"), backend, gpus=[])
    key = client_key()
    request = AllocateRequest(
        requirements=Requirements(cpu_count=1, memory_gb=0.25, disk_gb=1),
        duration_s=600,
        ssh_public_key=public_line(key),
    )
    try:
        big, small = await manager.allocate(OWNER, request), await manager.allocate(OWNER, request)
        if backend.disk_limit_enforced:
            pytest.skip("this engine enforces disk_gb itself (the watch is for drivers that do not)")
        assert big.ssh is not None and small.ssh is not None
        watch = DiskWatch(manager)
        await _run(small.ssh, key, "head -c 100000000 /dev/zero > /tmp/fine")  # 100 MB of its 1 GB
        assert await watch.check_once() == []
        done = await _run(big.ssh, key, "head -c 1400000000 /dev/zero > /tmp/fill; sync; echo wrote")
        assert "wrote" in done.stdout  # overlay2 on ext4: nothing stopped the write (advisory size)
        assert await watch.check_once() == [big.lease_id]
        assert manager.store.get(big.lease_id).state == "expired"
        assert big.lease_id not in await backend.running()  # its container (and layer) are gone
        assert manager.store.get(small.lease_id).state == "active"
    finally:
        client = backend._client()
        for container in client.containers.list(all=True, filters={"name": prefix}):
            container.remove(force=True, v=True)
        manager.store.close()
