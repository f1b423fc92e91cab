"""Volume lifecycle on the real engine: a miner restart finds its volumes (store and labels), another
miner on the same engine never adopts or removes them, and retention expiry removes a volume with
its Docker volume, mount and image file. Driven through the allocation manager, with real SSH."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import docker
import pytest
from test_docker_backend import IMAGE, client_key, docker_ready, public_line, ssh_run

from compute.allocation import AllocationManager, LeaseStore
from compute.allocation.docker.backend import DockerBackend
from compute.allocation.volumes.keeper import VolumeKeeper, VolumeLimits
from compute.allocation.volumes.store import VolumeStore
from compute.protocol import AllocateRequest, ErrorCode, RequestFailed, Requirements, VolumeRequest

__all__ = ["docker_ready"]
pytestmark = pytest.mark.docker
OWNER = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class Miner:
    """A miner's allocation stack (backend, store, volumes) over one data dir; rebuildable (restart)."""

    def __init__(self, root: Path, miner_id: str, prefix: str, clock: Clock, store_name: str = "leases.db"):
        self.backend = DockerBackend(
            image=IMAGE, name_prefix=prefix, miner_id=miner_id, volume_dir=root / "volumes", isolate=False
        )
        assert self.backend.volumes is not None
        limits = VolumeLimits(retention_s=3600.0)
        self.keeper = VolumeKeeper(VolumeStore(root / store_name), self.backend.volumes, limits, clock)
        self.manager = AllocationManager(
            LeaseStore(root / store_name), self.backend, gpus=[], clock=clock, volumes=self.keeper
        )


@pytest.fixture
def engine(docker_ready: None, tmp_path: Path):
    made: list[Miner] = []
    prefix = f"test-vol-{uuid.uuid4().hex[:6]}"

    def miner(miner_id: str, store_name: str = "leases.db", root: Path = tmp_path / "a") -> Miner:
        made.append(Miner(root, miner_id, prefix, clock, store_name))
        return made[-1]

    clock = Clock()
    yield miner, clock
    client = made[0].backend._client()
    for container in client.containers.list(all=True, filters={"name": prefix}):
        container.remove(force=True)
    for item in made:
        for found in item.backend.volumes._found():
            for user in client.containers.list(all=True, filters={"volume": found.docker_name}):
                user.remove(force=True)
            item.backend.volumes._remove(found.owner, found.name)


def request(key: str) -> AllocateRequest:
    requirements = Requirements(memory_gb=0.25, volume=VolumeRequest(name="work", size_gb=0.1))
    return AllocateRequest(requirements=requirements, duration_s=600, ssh_public_key=key)


async def test_restart_rediscovers_volumes_and_retention_removes_them(engine, tmp_path: Path) -> None:
    miner, clock = engine
    key = client_key()
    first = miner("miner-a")
    lease = await first.manager.allocate(OWNER, request(public_line(key)))
    endpoint = await first.backend.endpoint(lease.lease_id)
    await ssh_run(endpoint, key, "echo persisted > /workspace/note")
    await first.manager.deallocate(OWNER, lease.lease_id)

    other = miner("miner-b", root=tmp_path / "b")  # same engine, other miner: never touches ours
    assert await other.keeper.reconcile() == [] and await other.manager.list_volumes(OWNER) == []
    clock.now += 7200
    assert (await other.manager.sweep())["volumes_expired"] == []

    lost_store = miner("miner-a", store_name="fresh.db")  # the store was lost: labels bring it back
    report = await lost_store.manager.reconcile()
    assert report["volumes_adopted"] == [f"{OWNER}/work"]
    (info,) = await lost_store.manager.list_volumes(OWNER)
    assert (info.name, info.size_gb, info.quota) == ("work", 0.1, "hard")

    restarted = miner("miner-a")  # a host reboot: the image is no longer mounted; same store
    dname = restarted.backend.volumes.docker_name(OWNER, "work")
    subprocess.run(["umount", str(tmp_path / "a" / "volumes" / "mnt" / dname)], check=True)
    client = restarted.backend._client()
    with pytest.raises(docker.errors.APIError, match="no such file"):  # never the host disk instead
        client.containers.run(IMAGE, ["true"], volumes={dname: {"bind": "/w"}}, remove=True)
    for created in client.containers.list(all=True, filters={"volume": dname}):
        created.remove(force=True)  # created, never started
    await restarted.manager.reconcile()
    lease = await restarted.manager.allocate(OWNER, request(public_line(key)))
    endpoint = await restarted.backend.endpoint(lease.lease_id)
    assert (await ssh_run(endpoint, key, "cat /workspace/note")).strip() == "persisted"
    await restarted.manager.deallocate(OWNER, lease.lease_id)

    clock.now += 3599
    assert (await restarted.manager.sweep())["volumes_expired"] == []
    clock.now += 2
    assert (await restarted.manager.sweep())["volumes_expired"] == [f"{OWNER}/work"]
    assert await restarted.manager.list_volumes(OWNER) == []
    assert restarted.backend.volumes._found() == []
    assert list((tmp_path / "a" / "volumes").rglob("*.img")) == []
    assert not any(os.path.ismount(p) for p in (tmp_path / "a" / "volumes").rglob("*"))


async def test_watch_mode_reports_a_volume_over_its_size_and_refuses_to_attach_it(engine, tmp_path) -> None:
    miner, clock = engine
    watched = miner("miner-w", root=tmp_path / "w")
    watched.backend.volumes._mode = "watch"  # as on a host where no hard limit is possible
    keeper = watched.keeper
    await keeper.claim(OWNER, VolumeRequest(name="small", size_gb=0.1), [])
    client = watched.backend._client()
    dname = watched.backend.volumes.docker_name(OWNER, "small")
    assert client.volumes.get(dname).attrs["Options"] in (None, {})  # a plain local volume
    client.containers.run(
        IMAGE,
        ["dd", "if=/dev/zero", "of=/v/big", "bs=1M", "count=150"],
        volumes={dname: {"bind": "/v"}},
        remove=True,
    )
    (info,) = await keeper.infos(OWNER, [])
    assert info.quota == "watch" and info.over_quota and info.used_gb is not None and info.used_gb > 0.1
    with pytest.raises(RequestFailed) as refused:
        await keeper.claim(OWNER, VolumeRequest(name="small"), [])
    assert refused.value.code == ErrorCode.VOLUME_QUOTA and "over its 0.1 GB" in refused.value.reason
