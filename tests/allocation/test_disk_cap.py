"""A Docker lease's disk size holds in the kernel, a file deleted but kept open included.

Before: overlay2 on ext4 (this machine's engine) ignores ``--storage-opt size`` and the disk watch
measures the container's layer (``SizeRw``), which does not count a file the tenant deleted but
keeps open: a ``disk_gb=1`` lease wrote 2 GB that way and stayed active after 45 s, the host's disk
2 GB fuller. Now the lease's writable layer is an ext4 filesystem of its size (``diskcap``): here a
real lease (real SSH, the real manager) writes 2 GB into a deleted-but-open file and gets ENOSPC at
its size, the host's disk at most the cap fuller. A host where no cap can be held refuses leases
unless advisory sizes were accepted, and a lease disk that is not mounted (a reboot) never lets its
container write to the host's disk.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import asyncssh
import docker
import pytest
from test_docker_backend import IMAGE, client_key, docker_ready, public_line

from compute.allocation import AllocationManager, LeaseStore
from compute.allocation.docker.backend import DockerBackend
from compute.allocation.docker.diskcap import layer_dir
from compute.allocation.lifecycle.diskwatch import DiskWatch
from compute.protocol import AllocateRequest, RequestFailed, Requirements

__all__ = ["docker_ready"]
pytestmark = pytest.mark.docker
OWNER = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
GIB = 1024**3
# a writer that deletes its file, keeps it open (the sleep inherits the descriptor) and fills it
HOLD_DELETED = (
    "nohup sh -c 'exec 3>/held; rm /held; head -c 2000000000 /dev/zero >&3 2>/dev/shm/err; "
    "echo $? > /dev/shm/status; exec sleep 600' >/dev/null 2>&1 &"
)
# ends the process holding the deleted /held (plain sh and /proc: the image has no pkill)
END_HOLDER = (
    'for p in /proc/[0-9]*; do [ "$(readlink "$p/fd/3" 2>/dev/null)" = "/held (deleted)" ] && '
    'kill "${p#/proc/}"; done; sleep 1; exit 0'
)


async def _run(ssh, key: asyncssh.SSHKey, command: str) -> asyncssh.SSHCompletedProcess:  # noqa: ANN001
    async with asyncssh.connect(
        ssh.host, ssh.port, username=ssh.username, client_keys=[key], agent_path=None, config=None,
        known_hosts=([asyncssh.import_public_key(ssh.host_key)], [], []), connect_timeout=20,
    ) as conn:  # fmt: skip
        return await conn.run(command, timeout=300)


def _request(key: asyncssh.SSHKey) -> AllocateRequest:
    return AllocateRequest(
        requirements=Requirements(cpu_count=1, memory_gb=0.25, disk_gb=1),
        duration_s=600,
        ssh_public_key=public_line(key),
    )


def _quota_engine() -> bool:
    from compute.allocation.docker.spec import disk_quota_supported

    return disk_quota_supported(docker.from_env().info())[0]


@pytest.fixture
def stack(docker_ready: None, tmp_path: Path):
    if os.geteuid() != 0 or _quota_engine():
        pytest.skip("lease disks need root, and this engine's storage driver would hold the size itself")
    prefix = f"test-cap-{uuid.uuid4().hex[:6]}"
    backend = DockerBackend(
        image=IMAGE, name_prefix=prefix, miner_id=prefix, isolate=False,
        disk_dir=tmp_path / "disks", require_disk_cap=True,
    )  # fmt: skip
    manager = AllocationManager(LeaseStore(tmp_path / "leases.db"), backend, gpus=[])
    yield backend, manager
    client = backend._client()
    for container in client.containers.list(all=True, filters={"name": prefix}):
        container.remove(force=True, v=True)
    manager.store.close()


async def test_a_deleted_but_open_file_cannot_put_more_than_the_cap_on_the_host(stack, tmp_path: Path):
    backend, manager = stack
    key = client_key()
    free_before = shutil.disk_usage(tmp_path).free
    lease = await manager.allocate(OWNER, _request(key))
    assert lease.ssh is not None
    assert (backend.disk_limit_enforced, await backend.disk_cap()) == (True, "kernel")
    container = backend._get(lease.lease_id)
    assert container.labels["compute.disk_limit"] == "loop"
    image = tmp_path / "disks" / f"{lease.lease_id}.img"
    reserved = image.stat().st_blocks * 512
    assert GIB <= reserved <= GIB + 1024**2  # reserved when the lease started (and its extent map)

    free_started = shutil.disk_usage(tmp_path).free
    await _run(lease.ssh, key, HOLD_DELETED)
    for _ in range(240):
        done = await _run(lease.ssh, key, "cat /dev/shm/status 2>/dev/null; cat /dev/shm/err 2>/dev/null")
        if done.stdout.strip():
            break
        await asyncio.sleep(0.5)
    status, *error = done.stdout.strip().splitlines()
    assert status != "0" and "No space left on device" in " ".join(error), done.stdout
    held = await _run(
        lease.ssh, key, "ls -l /proc/*/fd 2>/dev/null | grep -c '/held (deleted)'; df -k / | tail -1"
    )
    count, df_line = held.stdout.strip().splitlines()
    assert int(count) >= 1  # the deleted file is still open, and full
    size_kib, used_kib = (int(x) for x in df_line.split()[1:3])
    assert size_kib * 1024 <= GIB and used_kib * 1024 > 0.9 * GIB  # df / shows the lease's own size
    free_after = shutil.disk_usage(tmp_path).free
    print(
        f"host disk: {(free_before - free_started) / GIB:.3f} GiB fuller when the 1 GiB lease started "
        f"(its image reserved), {(free_started - free_after) / 1024**2:.0f} MiB more while its tenant "
        "wrote 2 GB into a deleted, open file"
    )
    if free_started - free_after >= 128 * 1024**2 or free_before - free_after >= GIB + 256 * 1024**2:
        # The host's disk filled by more than the write could have put inside the image. Other tests
        # share this disk (CI runs three at once: one filled it by 5 GB during this write), so ask
        # whether it was this lease's: end the holder of the deleted file. Held outside the image, its
        # 2 GB would come back now; held inside, nothing comes back (the image keeps its blocks).
        held_at = shutil.disk_usage(tmp_path).free
        await _run(lease.ssh, key, END_HOLDER)
        came_back = shutil.disk_usage(tmp_path).free - held_at
        gone = await _run(lease.ssh, key, "ls -l /proc/*/fd 2>/dev/null | grep -c '/held (deleted)' || true")
        assert gone.stdout.strip() == "0"  # the holder really ended: what it held had its chance
        print(
            f"others filled the disk meanwhile; the holder ended and {came_back / 1024**2:.0f} MiB came back"
        )
        assert came_back < 128 * 1024**2  # the write stayed inside the reserved image
    assert image.stat().st_blocks * 512 == reserved  # never more, and none given back (no holes)
    assert await DiskWatch(manager).check_once() == []  # held by the kernel: nothing to stop
    assert manager.store.get(lease.lease_id).state == "active"
    assert (await _run(lease.ssh, key, "echo still-here")).stdout.strip() == "still-here"

    layer = layer_dir(container)
    await manager.deallocate(OWNER, lease.lease_id)
    assert not image.exists() and not layer.exists()
    assert str(tmp_path) not in Path("/proc/mounts").read_text()
    assert str(image) not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout


async def test_a_lease_disk_not_mounted_never_lets_its_container_write_to_the_host(stack):
    """After a reboot the image is not mounted: the container cannot start (its layer has no upper
    directory), and the backend's resume mounts the image first, with the tenant's files in it."""
    backend, manager = stack
    key = client_key()
    lease = await manager.allocate(OWNER, _request(key))
    assert lease.ssh is not None
    await _run(lease.ssh, key, "echo kept > /root/notes")
    container = backend._get(lease.lease_id)
    layer = layer_dir(container)
    container.stop(timeout=2)
    subprocess.run(["umount", str(layer)], check=True)  # what a host reboot leaves
    with pytest.raises(docker.errors.APIError):
        container.start()  # no upper directory on the host disk to write to
    record = manager.store.get(lease.lease_id).record
    endpoint = await backend.start(record)  # the miner's resume: the image mounted again first
    assert os.path.ismount(layer)
    ssh = lease.ssh.model_copy(update={"port": endpoint.ssh_port})
    assert (await _run(ssh, key, "cat /root/notes")).stdout.strip() == "kept"
    await manager.deallocate(OWNER, lease.lease_id)


async def test_a_size_that_cannot_be_held_is_refused_unless_advisory(docker_ready: None, tmp_path: Path):
    if _quota_engine():
        pytest.skip("this engine's storage driver holds the size itself")
    prefix = f"test-cap-{uuid.uuid4().hex[:6]}"
    key = client_key()
    # no lease disks (as for a remote engine): nothing can hold the size on overlay2 over ext4
    strict = DockerBackend(
        image=IMAGE, name_prefix=prefix, miner_id=prefix, isolate=False, require_disk_cap=True
    )
    manager = AllocationManager(LeaseStore(tmp_path / "strict.db"), strict, gpus=[])
    try:
        with pytest.raises(RequestFailed) as refused:
            await manager.allocate(OWNER, _request(key))
        assert refused.value.status == 503 and "--miner.disk_cap_advisory" in refused.value.reason
        assert await strict.disk_cap() == "refused"
        assert strict._client().containers.list(all=True, filters={"name": prefix}) == []
        advisory = DockerBackend(image=IMAGE, name_prefix=prefix, miner_id=prefix, isolate=False)
        accepting = AllocationManager(LeaseStore(tmp_path / "advisory.db"), advisory, gpus=[])
        lease = await accepting.allocate(OWNER, _request(key))
        assert await advisory.disk_cap() == "watched"
        assert advisory._get(lease.lease_id).labels["compute.disk_limit"] == "advisory"
        await accepting.deallocate(OWNER, lease.lease_id)
        accepting.store.close()
    finally:
        for container in strict._client().containers.list(all=True, filters={"name": prefix}):
            container.remove(force=True, v=True)
        manager.store.close()
