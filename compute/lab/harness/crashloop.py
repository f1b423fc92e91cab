"""``kill -9`` at every step of allocate and release, then restart: does any lease get lost?

A child process opens the lease store and backend, allocates (and for release steps, ends) one
lease, and SIGKILLs itself right after the chosen step. The parent then "restarts the miner":
a fresh store and backend, ``reconcile``, and checks the invariants the issue names:

- ghost lease: ``active`` in the store without a working endpoint (backend not running it, or
  its SSH port not answering with a banner);
- orphan: the backend runs it but the store has no live lease for it;
- failed restart: ``reconcile`` raised or reported a lease it could not bring back.

Used by ``python -m compute bench hardening`` and a slow test; the embedded backend runs
everywhere, ``docker`` makes orphans real containers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compute.allocation.lease.ports import ssh_banner
from compute.allocation.lease.store import LeaseStore
from compute.allocation.lifecycle.manager import AllocationManager
from compute.protocol import AllocateRequest, Requirements

ALLOCATE_STEPS = ("reserved", "started", "activated")
RELEASE_STEPS = ("ended", "stopped")
STEPS = ALLOCATE_STEPS + RELEASE_STEPS
OWNER = "5" + "H" * 47
_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@dataclass(frozen=True)
class CrashReport:
    runs: int
    kills: int  # runs whose child really died by SIGKILL at its step
    ghost_leases: int
    orphans: int
    failed_restarts: int


def _backend(kind: str, data: Path, port_range: tuple[int, int]) -> Any:
    if kind == "docker":
        from compute.allocation.docker.backend import DockerBackend

        return DockerBackend(ssh_port_range=port_range, name_prefix="crashloop", miner_id="crashloop")
    from compute.allocation.embedded.backend import EmbeddedBackend

    return EmbeddedBackend(data, bind_host="127.0.0.1", port_range=port_range)


def _die_after(obj: object, method: str, step: str, kill_at: str) -> None:
    original = getattr(obj, method)

    async def wrapped(*args: Any) -> Any:
        result = original(*args)
        result = await result if asyncio.iscoroutine(result) else result
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    def wrapped_sync(*args: Any) -> Any:
        result = original(*args)
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(obj, method, wrapped if asyncio.iscoroutinefunction(original) else wrapped_sync)


async def _child(kind: str, data: Path, port_range: tuple[int, int], kill_at: str) -> None:
    manager = AllocationManager(LeaseStore(data / "leases.db"), _backend(kind, data, port_range), [])
    await manager.reconcile()
    for step, obj, method in (
        ("reserved", manager.store, "reserve"),
        ("started", manager.backend, "start"),
        ("activated", manager.store, "activate"),
        ("ended", manager.store, "end"),
        ("stopped", manager.backend, "stop"),
    ):
        _die_after(obj, method, step, kill_at)
    request = AllocateRequest(
        requirements=Requirements(gpu_count=0, disk_gb=1), duration_s=3600, ssh_public_key=_KEY
    )
    lease = await manager.allocate(OWNER, request)
    await manager.deallocate(OWNER, lease.lease_id)


async def _restart_and_check(kind: str, data: Path, port_range: tuple[int, int]) -> tuple[int, int, int]:
    """(ghosts, orphans, failed) after a restart; then ends every lease so runs stay independent."""
    backend = _backend(kind, data, port_range)
    manager = AllocationManager(LeaseStore(data / "leases.db"), backend, [])
    try:
        try:
            report = await manager.reconcile()
            failed = len(report["failed"])
        except Exception:
            failed = 1
        running = await backend.running()
        live = manager.store.live()
        ghosts = 0
        for lease in live:
            ok = lease.state == "active" and lease.endpoint is not None and lease.lease_id in running
            if ok and lease.endpoint is not None:
                ok = await ssh_banner("127.0.0.1", lease.endpoint.ssh_port)
            ghosts += 0 if ok else 1
        orphans = len(running - {lease.lease_id for lease in live})
        for lease in live:
            if lease.state == "active":
                await manager.deallocate(OWNER, lease.lease_id)
        return ghosts, orphans, failed
    finally:
        if hasattr(backend, "close"):
            await backend.close()
        manager.store.close()


def run_crash_loop(
    data: Path, iterations: int = 20, kind: str = "embedded", port_range: tuple[int, int] = (46100, 46199)
) -> CrashReport:
    """``iterations`` kills at each step (``len(STEPS) * iterations`` runs), each followed by a restart."""
    data.mkdir(parents=True, exist_ok=True)
    ghosts = orphans = failed = runs = kills = 0
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
    }
    for _ in range(iterations):
        for step in STEPS:
            argv = [sys.executable, "-m", "compute.lab.harness.crashloop", kind, str(data), step]
            argv += [str(port_range[0]), str(port_range[1])]
            done = subprocess.run(argv, env=env, capture_output=True, timeout=120, check=False)
            kills += done.returncode == -signal.SIGKILL
            g, o, f = asyncio.run(_restart_and_check(kind, data, port_range))
            ghosts, orphans, failed, runs = ghosts + g, orphans + o, failed + f, runs + 1
    return CrashReport(runs, kills, ghosts, orphans, failed)


if __name__ == "__main__":  # the child: python -m compute.lab.harness.crashloop KIND DATA STEP LOW HIGH
    kind_, data_, step_, low_, high_ = sys.argv[1:6]
    asyncio.run(_child(kind_, Path(data_), (int(low_), int(high_)), step_))
