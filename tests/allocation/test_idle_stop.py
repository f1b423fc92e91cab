"""The idle stop: what "idle" means (pure), then the idle watch over real leases (embedded, Docker).

The watch's wall clock is a fake one advanced by minutes per check (the idle window), while the
activity it measures is real: real SSH sessions, a real CPU burner started over SSH, real cgroup and
process counters sampled over real (short) intervals.
"""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from pathlib import Path

import asyncssh
import pytest
from allockit import RenterKey, new_renter_key

from compute.allocation import AllocationManager, EmbeddedBackend, IdleWatch, LeaseStore
from compute.allocation.docker.activity import gpu_percent, ssh_sessions
from compute.allocation.embedded import sandbox
from compute.allocation.lease.activity import Activity, IdleThresholds, judge
from compute.allocation.lease.backend import BackendError
from compute.protocol import (
    MIN_IDLE_SECONDS,
    AllocateRequest,
    ErrorCode,
    GpuSpec,
    LeaseInfo,
    RequestFailed,
    Requirements,
)

OWNER = "5" + "C" * 47
GPUS = [GpuSpec(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 10**9)]
WINDOW = MIN_IDLE_SECONDS  # 600 s: the shortest idle stop a renter may ask for
BURN = "setsid nohup timeout 40 sh -c 'while :; do :; done' >/dev/null 2>&1 </dev/null &"


def at(
    t: float, cpu: float | None = 0.0, net: int | None = 0, sessions: int = 0, gpu=None, gpus=0
) -> Activity:
    return Activity(t, cpu, net, sessions, gpu, gpus)


@pytest.mark.parametrize(
    ("before", "now", "idle", "seen"),
    [
        (at(0), at(60), True, "idle"),
        (at(0), at(60, sessions=1), False, "1 ssh session(s)"),
        (at(0, sessions=2), at(60), False, "2 ssh session(s)"),  # it may have lasted until just now
        (at(0, cpu=1.0), at(60, cpu=1.0 + 0.02 * 60 * 1.5), False, "cpu 0.03 cores"),
        (at(0, cpu=1.0), at(60, cpu=1.0 + 0.02 * 60 * 0.5), True, "idle"),
        (at(0, cpu=5.0), at(60, cpu=1.0), False, "cpu counter restarted"),
        (at(0, cpu=None), at(60), False, "cpu use unknown"),
        (at(0, net=0), at(60, net=200 * 1024), False, "network 3.3 KiB/s"),
        (at(0, net=0), at(60, net=8 * 1024), True, "idle"),  # a few logins and probes stay idle
        (at(0, net=None), at(60, net=None), True, "idle"),  # not measured (embedded: host network)
        (at(0, net=900), at(60, net=10), False, "network counter restarted"),
        (at(0, gpus=1), at(60, gpus=1), False, "gpu use unknown"),
        (at(0, gpus=1, gpu=0.0), at(60, gpus=1, gpu=40.0), False, "gpu 40%"),
        (at(0, gpus=1, gpu=90.0), at(60, gpus=1, gpu=0.0), False, "gpu 90%"),
        (at(0, gpus=1), at(60, gpus=1, gpu=0.0), False, "gpu use unknown"),
        (at(0, gpus=2, gpu=0.0), at(60, gpus=2, gpu=3.0), True, "idle"),
        (at(0), at(400), False, "no continuous measurement (400 s between samples)"),
        (at(60), at(60), False, "no continuous measurement (0 s between samples)"),
    ],
)
def test_idle_only_when_every_signal_says_so(before, now, idle, seen):
    assert judge(before, now, IdleThresholds()) == (idle, seen)


def test_docker_readings_parse_sessions_and_gpu_lines():
    top = {
        "Titles": ["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"],
        "Processes": [
            [
                "root",
                "1",
                "0",
                "0",
                "x",
                "?",
                "0",
                "sshd: /usr/sbin/sshd -D -e [listener] 0 of 10-100 startups",
            ],
            ["root", "2", "1", "0", "x", "?", "0", "sshd: root@notty"],
            ["root", "3", "1", "0", "x", "?", "0", "sshd-session: root@pts/0"],
            ["root", "4", "1", "0", "x", "?", "0", "sshd: root [priv]"],
            ["root", "5", "1", "0", "x", "?", "0", "python train.py"],
        ],
    }
    assert ssh_sessions(top) == 2
    assert gpu_percent(b"3\n97\n") == 97.0
    assert gpu_percent(b"[N/A]\n") is None and gpu_percent(b"") is None


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _docker_ready() -> str | None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get("compute-base:cpu")
    except Exception as exc:  # no engine or image: the Docker variant cannot run here
        return f"Docker engine or compute-base:cpu unavailable: {exc}"
    return None


@pytest.fixture(params=["embedded", pytest.param("docker", marks=pytest.mark.docker)])
async def rig(request, tmp_path: Path):
    """(manager, watch, clock, ssh user) over a real backend; containers removed at the end."""
    clock = Clock()
    base = random.randrange(200, 590) * 100
    if request.param == "embedded":
        backend = EmbeddedBackend(tmp_path / "data", bind_host="127.0.0.1", port_range=(base, base + 99))
        user = "lease"
    else:
        reason = _docker_ready()
        if reason:
            if os.environ.get("COMPUTE_REQUIRE_DOCKER") == "1":
                pytest.fail(reason)
            pytest.skip(reason)
        from compute.allocation import DockerBackend

        backend = DockerBackend(
            image="compute-base:cpu",
            ssh_port_range=(base, base + 99),
            name_prefix=f"t-idle-{uuid.uuid4().hex[:6]}",
        )
        user = "root"
    manager = AllocationManager(LeaseStore(tmp_path / "leases.db"), backend, GPUS, clock=clock)
    yield manager, IdleWatch(manager, clock=clock), clock, user
    for lease in manager.store.active():
        await backend.stop(lease.lease_id)
    if request.param == "docker":
        await backend.release_network()


async def rent(
    manager: AllocationManager, key: RenterKey, idle_stop_s: int | None = WINDOW, gpus: int = 0
) -> LeaseInfo:
    request = AllocateRequest(
        requirements=Requirements(gpu_count=gpus, idle_stop_s=idle_stop_s),
        duration_s=6 * 3600,
        ssh_public_key=key.public_line,
    )
    return await manager.allocate(OWNER, request)


def connect(lease: LeaseInfo, key: RenterKey, user: str):
    assert lease.ssh is not None
    return asyncssh.connect(
        lease.ssh.host,
        lease.ssh.port,
        username=user,
        client_keys=[key.private],
        known_hosts=([asyncssh.import_public_key(lease.ssh.host_key)], [], []),
        agent_path=None,
        config=None,
        connect_timeout=10,
    )


async def checks(watch: IdleWatch, clock: Clock, count: int, step_s: float = WINDOW / 2) -> list[list[str]]:
    """``count`` passes of the watch, the fake wall clock ``step_s`` apart, real time ~1 s apart."""
    stopped = []
    for _ in range(count):
        await asyncio.sleep(1.0)
        clock.now += step_s
        stopped.append(await watch.check_once())
    return stopped


@pytest.mark.slow
async def test_an_idle_lease_is_stopped_once_idle_for_its_whole_window(rig, renter_key):
    manager, watch, clock, _ = rig
    lease = await rent(manager, renter_key)
    kept = await rent(manager, renter_key, idle_stop_s=None)  # asked for no idle stop: never touched
    assert await watch.check_once() == []  # the first sample starts the run
    assert await checks(watch, clock, 2) == [[], [lease.lease_id]]  # idle 300 s, then 600 s
    status = await manager.status(OWNER, lease.lease_id)
    assert status.state == "expired" and status.idle is not None and status.idle.stopped
    assert status.expires_at > clock.now  # ended before its term: the idle stop, not the term
    assert lease.lease_id not in await manager.backend.running()
    other = await manager.status(OWNER, kept.lease_id)
    assert other.state == "active" and other.idle is None


@pytest.mark.slow
async def test_a_working_lease_with_nobody_logged_in_is_never_stopped(rig, renter_key):
    manager, watch, clock, user = rig
    lease = await rent(manager, renter_key)
    async with connect(lease, renter_key, user) as conn:  # start a job, log out
        assert (await conn.run(BURN, timeout=20)).exit_status == 0
    await watch.check_once()
    assert await checks(watch, clock, 4) == [[], [], [], []]  # 1200 s of fake time, busy throughout
    status = await manager.status(OWNER, lease.lease_id)
    assert status.state == "active" and status.idle is not None
    assert status.idle.idle_since is None and status.idle.seen.startswith("cpu "), status.idle


@pytest.mark.slow
async def test_an_open_ssh_session_keeps_an_idle_lease_and_the_window_restarts_after(rig, renter_key):
    manager, watch, clock, user = rig
    lease = await rent(manager, renter_key)
    await watch.check_once()
    async with connect(lease, renter_key, user) as conn:
        shell = await conn.create_process("sleep 60")  # a renter's open shell, doing nothing
        await asyncio.sleep(0.5)
        assert await checks(watch, clock, 3) == [[], [], []]
        assert (await manager.status(OWNER, lease.lease_id)).idle.seen == "1 ssh session(s)"
        shell.close()
    # logged out: a full window of idleness from now on, not counted from before
    assert await checks(watch, clock, 3) == [[], [], [lease.lease_id]]


@pytest.mark.slow
async def test_a_sample_that_fails_restarts_the_idle_run(rig, renter_key, monkeypatch):
    manager, watch, clock, _ = rig
    lease = await rent(manager, renter_key)
    await watch.check_once()
    assert await checks(watch, clock, 1) == [[]]  # idle 300 s
    real = type(manager.backend).activity

    async def broken(self, record):
        raise BackendError("engine did not answer")

    monkeypatch.setattr(type(manager.backend), "activity", broken)
    assert await checks(watch, clock, 1) == [[]]  # unknown is busy: 600 s would have stopped it
    assert "engine did not answer" in (await manager.status(OWNER, lease.lease_id)).idle.seen
    monkeypatch.setattr(type(manager.backend), "activity", real)
    assert await checks(watch, clock, 3) == [[], [], [lease.lease_id]]  # first sample again, then 600 s


@pytest.mark.slow
async def test_a_gpu_lease_whose_gpu_use_cannot_be_read_is_never_stopped(tmp_path, renter_key):
    clock = Clock()
    base = random.randrange(200, 590) * 100
    backend = EmbeddedBackend(tmp_path / "data", bind_host="127.0.0.1", port_range=(base, base + 99))
    manager = AllocationManager(LeaseStore(tmp_path / "leases.db"), backend, GPUS, clock=clock)
    watch = IdleWatch(manager, clock=clock)
    lease = await rent(manager, renter_key, gpus=1)  # no NVIDIA driver here: utilisation unknown
    await watch.check_once()
    assert await checks(watch, clock, 3) == [[], [], []]
    assert (await manager.status(OWNER, lease.lease_id)).idle.seen == "gpu use unknown"
    await backend.stop(lease.lease_id)


@pytest.mark.slow
async def test_a_sandboxed_lease_working_with_a_cleared_environment_is_never_stopped(tmp_path, renter_key):
    """Off the local demo an embedded lease runs as its own uid: every process of that uid counts,
    even one that dropped ``LEASE_ID`` from its environment."""
    if not sandbox.available():
        pytest.skip("the lease sandbox needs root on Linux")
    clock = Clock()
    base = random.randrange(200, 590) * 100
    paths = sandbox.SandboxPaths.for_miner(tmp_path / "wallets", tmp_path / "data")
    backend = EmbeddedBackend(
        tmp_path / "data", bind_host="127.0.0.1", port_range=(base, base + 99), sandbox=paths
    )
    manager = AllocationManager(LeaseStore(tmp_path / "leases.db"), backend, GPUS, clock=clock)
    watch = IdleWatch(manager, clock=clock)
    lease = await rent(manager, renter_key)
    async with connect(lease, renter_key, "lease") as conn:
        done = await conn.run(BURN.replace("nohup timeout", "nohup env -i timeout"), timeout=20)
        assert done.exit_status == 0, done.stderr
    await watch.check_once()
    assert await checks(watch, clock, 3) == [[], [], []]
    assert (await manager.status(OWNER, lease.lease_id)).idle.seen.startswith("cpu ")
    await backend.stop(lease.lease_id)


class NoActivityBackend(EmbeddedBackend):
    activity = None  # type: ignore[assignment]  # a backend that cannot measure: no idle stop


async def test_a_backend_that_cannot_measure_refuses_an_idle_stop(tmp_path, renter_key):
    backend = NoActivityBackend(tmp_path / "data", bind_host="127.0.0.1", port_range=(46100, 46199))
    manager = AllocationManager(LeaseStore(tmp_path / "leases.db"), backend, GPUS)
    with pytest.raises(RequestFailed) as refused:
        await rent(manager, renter_key)
    assert refused.value.code == ErrorCode.UNSUPPORTED and "idle stop" in refused.value.reason
    assert manager.check(Requirements(idle_stop_s=WINDOW)).available is False
    lease = await rent(manager, new_renter_key(), idle_stop_s=None)  # without one it rents as before
    assert lease.idle is None
    await backend.stop(lease.lease_id)
