"""``kill -9`` at every step of creating and removing a persistent volume, then restart.

A child process makes one volume through the real keeper and Docker driver (hard mode: a
reserved, loop-mounted ext4 image) and deletes it again, and SIGKILLs itself right after the
chosen step. The parent then "restarts the miner" (a fresh store, driver and keeper, and
``reconcile``) and checks what the issue names:

- unusable: a volume the store lists that cannot be mounted and written in a container;
- stray: files, mounts or a Docker volume left of a volume the store does not list;
- failed restart: ``reconcile`` raised.

Used by ``python -m compute bench hardening`` (``volumes`` part) and a slow Docker test. Needs a
Docker engine, the image and root (loop mounts).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STEPS = (
    "journaled",  # the keeper wrote the intent (state creating)
    "reserved",  # the image's blocks are reserved (a .partial file)
    "formatted",  # mkfs ran on the .partial
    "mounted",  # renamed and loop-mounted
    "docker",  # the Docker volume exists
    "ready",  # the keeper marked it ready
    "removing",  # the keeper wrote the removal's intent
    "unlinked",  # the driver removed the Docker volume, mount and image
    "deleted",  # the keeper forgot it
)
OWNER = "5" + "V" * 47
NAME = "work"
IMAGE = "compute-base:cpu"


@dataclass(frozen=True)
class VolumeCrashReport:
    runs: int
    kills: int
    unusable: int
    strays: int
    failed_restarts: int


def _stack(root: Path, miner: str) -> tuple[Any, Any]:
    from compute.allocation.docker.backend import DockerBackend
    from compute.allocation.volumes.keeper import VolumeKeeper, VolumeLimits
    from compute.allocation.volumes.store import VolumeStore

    backend = DockerBackend(
        image=IMAGE, name_prefix=miner, miner_id=miner, volume_dir=root / "volumes", isolate=False
    )
    assert backend.volumes is not None
    keeper = VolumeKeeper(VolumeStore(root / "leases.db"), backend.volumes, VolumeLimits(retention_s=3600.0))
    return backend, keeper


def _die_at(step: str) -> Any:
    seen: list[str] = []

    def event(name: str) -> None:
        seen.append(name)
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    return event


def _hook(obj: object, method: str, after: Any) -> None:
    original = getattr(obj, method)

    def wrapped(*args: Any) -> Any:
        result = original(*args)
        after(*args)
        return result

    setattr(obj, method, wrapped)


async def _child(root: Path, miner: str, step: str) -> None:
    from compute.protocol import VolumeRequest

    backend, keeper = _stack(root, miner)
    driver, store, event = backend.volumes, keeper.store, _die_at(step)
    if driver.quota != "hard":  # resolved (probed) before the hooks: the probe makes an image too
        raise SystemExit("volume crash loop: hard volume quotas do not work here (root, mkfs.ext4)")
    _hook(store, "insert", lambda row: event("journaled"))
    _hook(driver, "_reserve", lambda *a: event("reserved"))
    _hook(driver, "_mkfs", lambda *a: event("formatted"))
    _hook(driver, "_mount", lambda *a: event("mounted"))
    _hook(driver, "_ensure_docker_volume", lambda *a: event("docker"))
    _hook(store, "set_state", lambda owner, name, state: event("ready" if state == "ready" else state))
    _hook(driver, "_remove", lambda *a: event("unlinked"))
    _hook(store, "delete", lambda *a: event("deleted"))
    await keeper.reconcile()
    await keeper.claim(OWNER, VolumeRequest(name=NAME, size_gb=0.1), [])
    await keeper.delete(OWNER, NAME, [])


async def _restart_and_check(root: Path, miner: str) -> tuple[int, int, int]:
    """(unusable, strays, failed) after a restart; then removes the volume so runs stay independent."""
    backend, keeper = _stack(root, miner)
    driver = backend.volumes
    try:
        try:
            await keeper.reconcile()
            failed = 0
        except Exception:  # noqa: BLE001 - counted: a restart that cannot finish is the failure
            failed = 1
        rows = await asyncio.to_thread(keeper.store.all)
        unusable = 0
        for row in rows:
            try:
                dname = await driver.prepare(row.owner, row.name)
                out = await asyncio.to_thread(
                    driver._helper,
                    ["sh", "-c", "echo ok > /v/probe && cat /v/probe"],
                    {dname: {"bind": "/v"}},
                )
                unusable += out.strip() != b"ok" or row.state != "ready"
            except Exception:  # noqa: BLE001 - a listed volume that cannot be used
                unusable += 1
        strays = 0
        if not rows:
            dname = driver.docker_name(OWNER, NAME)
            leftovers = [
                driver._image(dname).exists(),
                driver._image(dname).with_suffix(".partial").exists(),
                os.path.ismount(driver._mnt(dname)),
                await asyncio.to_thread(driver._ours, dname) is not None,
            ]
            strays = sum(leftovers)
        for row in rows:
            await keeper.delete(row.owner, row.name, [])
        return unusable, strays, failed
    finally:
        keeper.store.close()


def run_volume_crash_loop(root: Path, iterations: int = 1) -> VolumeCrashReport:
    """``iterations`` kills at each step, each followed by a restart and the checks."""
    root.mkdir(parents=True, exist_ok=True)
    unusable = strays = failed = runs = kills = 0
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
    }
    miner = f"volcrash-{secrets.token_hex(4)}"  # its own Docker names: nothing of an earlier run counts
    for _ in range(iterations):
        for step in STEPS:
            argv = [sys.executable, "-m", "compute.lab.harness.volcrash", str(root), miner, step]
            done = subprocess.run(argv, env=env, capture_output=True, timeout=180, check=False)
            kills += done.returncode == -signal.SIGKILL
            u, s, f = asyncio.run(_restart_and_check(root, miner))
            unusable, strays, failed, runs = unusable + u, strays + s, failed + f, runs + 1
    return VolumeCrashReport(runs, kills, unusable, strays, failed)


if __name__ == "__main__":  # the child: python -m compute.lab.harness.volcrash ROOT MINER STEP
    asyncio.run(_child(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
