"""With LXCFS on the host, a lease's /proc (free, top) shows the lease, not the host's totals."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_docker_backend import IMAGE, docker_ready

from compute.allocation.docker import spec

__all__ = ["docker_ready"]  # the fixture, imported from test_docker_backend
FAKE_MEMINFO = "MemTotal:        4194304 kB\nMemFree:         4000000 kB\nMemAvailable:    4100000 kB\n"


def _fake_lxcfs(tmp_path: Path) -> Path:
    root = tmp_path / "lxcfs"
    (root / "proc").mkdir(parents=True)
    for name in spec.LXCFS_PROC_FILES:
        (root / "proc" / name).write_text(FAKE_MEMINFO if name == "meminfo" else "")
    return root


def test_lxcfs_is_used_only_where_it_runs(tmp_path: Path) -> None:
    assert spec.lxcfs_root(str(tmp_path / "absent")) is None
    assert spec.lxcfs_volumes(None) == {}
    root = str(_fake_lxcfs(tmp_path))
    assert spec.lxcfs_root(root) == root
    volumes = spec.lxcfs_volumes(root)
    assert volumes[f"{root}/proc/meminfo"] == {"bind": "/proc/meminfo", "mode": "ro"}
    assert {v["bind"] for v in volumes.values()} == {f"/proc/{n}" for n in spec.LXCFS_PROC_FILES}


@pytest.mark.docker
def test_a_container_with_the_lxcfs_mounts_reads_its_own_meminfo(tmp_path: Path, docker_ready: None) -> None:
    import docker

    client = docker.from_env()
    meminfo = _fake_lxcfs(tmp_path) / "proc" / "meminfo"
    volumes = {str(meminfo): {"bind": "/proc/meminfo", "mode": "ro"}}
    try:
        out = client.containers.run(IMAGE, ["head", "-1", "/proc/meminfo"], volumes=volumes, remove=True)
    finally:
        client.close()
    assert out.decode().split() == ["MemTotal:", "4194304", "kB"]  # what `free` reads: the lease's figure
