"""Persistent volumes survive ``kill -9`` at any step and never overcommit the disk.

Against the real Docker engine with hard volumes (loop-mounted ext4 images, root):

- ``kill -9`` after each step of creating and of removing a volume, then a restart: no volume
  listed but unusable, nothing half-made left behind (before: a crash during creation left the
  volume listed, every retry failed with 503 "does not exist on this engine", and a ``.partial``
  image stayed);
- on a small data disk, a volume's space is reserved when it is made: a second renter's volume
  that would not fit is refused with a clean 507, the first renter filling its volume gets ENOSPC
  inside it only, and the miner's own store keeps working (before: sparse images let A's writes take
  the disk to 0; B got 507 and A's deallocate a 500).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from test_docker_backend import IMAGE, docker_ready

from compute.allocation.docker.backend import DockerBackend
from compute.allocation.volumes.keeper import VolumeKeeper, VolumeLimits
from compute.allocation.volumes.store import VolumeStore
from compute.lab.harness.volcrash import STEPS, run_volume_crash_loop
from compute.protocol import ErrorCode, RequestFailed, VolumeRequest

__all__ = ["docker_ready"]
pytestmark = pytest.mark.docker
A, B = "5" + "A" * 47, "5" + "B" * 47


def _hard_or_skip() -> None:
    import os

    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        pytest.skip("hard volumes need root and mkfs.ext4")


@pytest.mark.slow
def test_kill_9_at_every_volume_step_leaves_no_unusable_or_stray_volume(
    docker_ready: None, tmp_path: Path
) -> None:
    _hard_or_skip()
    report = run_volume_crash_loop(tmp_path / "miner", iterations=1)
    assert report.runs == len(STEPS) and report.kills == len(STEPS)  # each child died at its step
    assert (report.unusable, report.strays, report.failed_restarts) == (0, 0, 0), report


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 1 GiB ext4 filesystem mounted as the miner's data dir."""
    _hard_or_skip()
    image, mnt = tmp_path / "disk.img", tmp_path / "data"
    mnt.mkdir()
    subprocess.run(["truncate", "-s", "1G", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


async def test_volumes_reserve_their_space_and_a_full_volume_hurts_nobody_else(
    docker_ready: None, small_disk: Path
) -> None:
    backend = DockerBackend(
        image=IMAGE, name_prefix=f"test-small-{uuid.uuid4().hex[:6]}", miner_id=f"small-{uuid.uuid4().hex[:6]}",
        volume_dir=small_disk / "volumes", isolate=False,
    )  # fmt: skip
    assert backend.volumes is not None and backend.volumes.quota == "hard"
    store = VolumeStore(small_disk / "leases.db")
    keeper = VolumeKeeper(store, backend.volumes, VolumeLimits(max_total_gb=1000, max_per_renter_gb=200))
    try:
        await keeper.claim(A, VolumeRequest(name="a", size_gb=0.5), [])
        free_after_a = shutil.disk_usage(small_disk).free
        with pytest.raises(RequestFailed) as refused:  # 0.5 GiB more would not leave the margin
            await keeper.claim(B, VolumeRequest(name="b", size_gb=0.5), [])
        assert (refused.value.code, refused.value.status) == (ErrorCode.INSUFFICIENT_STORAGE, 507)
        assert store.get(B, "b") is None and not list((small_disk / "volumes" / "images").glob("*.partial"))
        dname = await backend.volumes.prepare(A, "a")
        fill = "dd if=/dev/zero of=/v/fill bs=1M count=700 conv=fsync 2>&1; df -k /v | tail -1"
        out = backend.volumes._helper(["sh", "-c", f"{fill}; true"], {dname: {"bind": "/v"}}).decode()
        assert "No space left on device" in out  # A's writes stop at A's own size ...
        assert (
            shutil.disk_usage(small_disk).free >= free_after_a - 8 * 1024**2
        )  # ... the host disk kept its room
        await keeper.claim(B, VolumeRequest(name="b2", size_gb=0.1), [])  # the miner still serves others
        assert store.get(B, "b2") is not None
    finally:
        for owner, name in ((A, "a"), (B, "b2")):
            if store.get(owner, name) is not None:
                await keeper.delete(owner, name, [])
        store.close()
