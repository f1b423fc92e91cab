"""Helpers for miner tests on a real Docker engine: skip logic, the miner process, lease containers.

The ``docker`` tests need a running engine and the ``compute-base:cpu`` image
(scripts/build_base_image.sh). They skip with the reason otherwise, and fail instead when
``COMPUTE_REQUIRE_DOCKER=1`` (CI). Every container a test creates carries its owner hotkey in
the ``compute.owner`` label; :class:`Janitor` removes them all at teardown, even after a failure.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

IMAGE = "compute-base:cpu"
ROOT = Path(__file__).resolve().parents[2]
# Runs inside the lease over SSH: CFS quota and period (cgroup v2 or v1), then the memory limit.
LIMITS_PROBE = (
    "if [ -f /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max; "
    "else echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); fi; "
    "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
)


def docker_skip_reason() -> str | None:
    """Why the Docker tests cannot run here, or None when the engine and the image are there."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:  # any failure means "no usable engine here"
        return f"Docker engine not reachable: {exc}"
    try:
        client.images.get(IMAGE)
    except Exception:
        return f"image {IMAGE} missing: run scripts/build_base_image.sh"
    finally:
        client.close()
    return None


def require_docker() -> None:
    reason = docker_skip_reason()
    if reason and os.environ.get("COMPUTE_REQUIRE_DOCKER") == "1":
        pytest.fail(f"COMPUTE_REQUIRE_DOCKER=1 but {reason}")
    if reason:
        pytest.skip(reason)


def parse_limits(output: str) -> tuple[float, int]:
    """(CPUs allowed by the CFS quota, memory limit in bytes) from :data:`LIMITS_PROBE` output."""
    cpu_line, memory_line = output.strip().splitlines()[-2:]
    quota, period = cpu_line.split()
    return int(quota) / int(period), int(memory_line)


class Janitor:
    """Finds and removes the lease containers owned by the test's hotkeys."""

    def __init__(self, owners: list[str]) -> None:
        import docker

        self.client = docker.from_env()
        self.owners = owners

    def containers(self) -> list[Any]:
        found = []
        for owner in self.owners:
            found += self.client.containers.list(all=True, filters={"label": f"compute.owner={owner}"})
        return found

    def container(self, lease_id: str) -> Any | None:
        """The lease's container (any state), or None when it is gone."""
        found = self.client.containers.list(all=True, filters={"label": f"compute.lease_id={lease_id}"})
        return found[0] if found else None

    async def wait_gone(self, lease_id: str, within_s: float) -> bool:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if await asyncio.to_thread(self.container, lease_id) is None:
                return True
            await asyncio.sleep(0.3)
        return False

    def clean(self) -> None:
        for container in self.containers():
            container.remove(force=True, v=True)
        self.client.close()


def stop_miner(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
