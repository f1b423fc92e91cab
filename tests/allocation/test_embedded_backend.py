"""EmbeddedBackend: real asyncssh listeners, real SSH clients, real subprocesses."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import asyncssh
import pytest
from allockit import RenterKey, new_renter_key, ssh_run
from portspace import OFFSET

from compute.allocation.embedded.backend import EmbeddedBackend
from compute.allocation.lease.backend import BackendError
from compute.allocation.lease.records import LeaseRecord

PORTS = (OFFSET + 41000 + os.getpid() % 500, OFFSET + 41000 + os.getpid() % 500 + 40)


def record(
    lease_id: str, key: RenterKey, memory_mb: int = 0, gpus: tuple[int, ...] = (), extra_ports: int = 0
):
    now = time.time()
    return LeaseRecord(
        lease_id,
        "5" + "F" * 47,
        "rental",
        gpus,
        1,
        memory_mb,
        5,
        64,
        extra_ports,
        key.public_line,
        now,
        now + 3600,
    )


@pytest.fixture
async def backend(tmp_path: Path):
    b = EmbeddedBackend(tmp_path, ssh_host="127.0.0.1", bind_host="127.0.0.1", port_range=PORTS)
    yield b
    for lease_id in await b.running():
        await b.stop(lease_id)


async def test_command_runs_in_lease_home_with_its_gpus(backend, renter_key):
    ep = await backend.start(record("a" * 32, renter_key, gpus=(1, 3)))
    result = await ssh_run(
        "127.0.0.1",
        ep.ssh_port,
        ep.host_key,
        renter_key,
        'echo "$PWD|$CUDA_VISIBLE_DEVICES|$USER"; echo err >&2; exit 3',
    )
    assert result.exit_status == 3
    assert result.stdout == f"{backend.root / ('a' * 32) / 'home'}|1,3|lease\n"
    assert result.stderr == "err\n"
    assert ep.username == "lease" and ep.host_key.startswith("ssh-ed25519 ")


async def test_stdin_and_large_output_are_streamed_intact(backend, renter_key):
    ep = await backend.start(record("b" * 32, renter_key))
    payload = "x" * 300_000
    result = await ssh_run(
        "127.0.0.1",
        ep.ssh_port,
        ep.host_key,
        renter_key,
        "cat; head -c 200000 /dev/zero | wc -c",
        stdin=payload,
    )
    assert result.stdout == payload + "200000\n"


async def test_wrong_username_and_wrong_key_are_refused(backend, renter_key):
    ep = await backend.start(record("c" * 32, renter_key))
    with pytest.raises(asyncssh.PermissionDenied):
        await ssh_run("127.0.0.1", ep.ssh_port, ep.host_key, renter_key, "true", username="root")
    with pytest.raises(asyncssh.PermissionDenied):
        await ssh_run("127.0.0.1", ep.ssh_port, ep.host_key, new_renter_key(), "true")


async def test_key_exchange_refuses_old_key_and_accepts_new(backend, renter_key):
    ep = await backend.start(record("d" * 32, renter_key))
    new_key = new_renter_key()
    await backend.set_authorized_key("d" * 32, new_key.public_line)
    with pytest.raises(asyncssh.PermissionDenied):
        await ssh_run("127.0.0.1", ep.ssh_port, ep.host_key, renter_key, "true")
    assert (await ssh_run("127.0.0.1", ep.ssh_port, ep.host_key, new_key, "echo ok")).stdout == "ok\n"


async def test_port_forwarding_is_refused(backend, renter_key):
    ep = await backend.start(record("e" * 32, renter_key))
    pinned = ([asyncssh.import_public_key(ep.host_key)], [], [])
    async with asyncssh.connect(
        "127.0.0.1",
        ep.ssh_port,
        username="lease",
        client_keys=[renter_key.private],
        known_hosts=pinned,
        agent_path=None,
        config=None,
    ) as conn:
        with pytest.raises(asyncssh.ChannelOpenError):
            await conn.open_connection("127.0.0.1", 22)


async def test_stop_kills_running_commands_and_closes_listener(backend, renter_key, tmp_path):
    ep = await backend.start(record("f" * 32, renter_key))
    marker = tmp_path / "pid"
    task = asyncio.ensure_future(
        ssh_run("127.0.0.1", ep.ssh_port, ep.host_key, renter_key, f"sh -c 'echo $$ > {marker}; sleep 60'")
    )
    for _ in range(100):
        if marker.exists() and marker.read_text().strip():
            break
        await asyncio.sleep(0.05)
    pid = int(marker.read_text())
    await backend.stop("f" * 32)
    await asyncio.wait([task], timeout=5)
    await asyncio.sleep(0.2)
    assert not _alive(pid)
    assert await backend.running() == set()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", ep.ssh_port), timeout=1).close()
    assert not (backend.root / ("f" * 32)).exists()


async def test_closing_the_session_kills_the_command(backend, renter_key, tmp_path):
    ep = await backend.start(record("1" * 32, renter_key))
    marker = tmp_path / "pid"
    pinned = ([asyncssh.import_public_key(ep.host_key)], [], [])
    async with asyncssh.connect(
        "127.0.0.1",
        ep.ssh_port,
        username="lease",
        client_keys=[renter_key.private],
        known_hosts=pinned,
        agent_path=None,
        config=None,
    ) as conn:
        await conn.create_process(f"echo $$ > {marker}; exec sleep 60")
        for _ in range(100):
            if marker.exists() and marker.read_text().strip():
                break
            await asyncio.sleep(0.05)
    pid = int(marker.read_text())
    for _ in range(50):
        if not _alive(pid):
            break
        await asyncio.sleep(0.1)
    assert not _alive(pid)


async def test_restart_keeps_host_key_and_port(backend, renter_key):
    ep = await backend.start(record("2" * 32, renter_key))
    await backend.restart("2" * 32)
    result = await ssh_run("127.0.0.1", ep.ssh_port, ep.host_key, renter_key, "echo back")
    assert result.stdout == "back\n"


async def test_new_backend_instance_serves_same_host_key_after_crash(tmp_path, renter_key):
    first = EmbeddedBackend(tmp_path, bind_host="127.0.0.1", port_range=PORTS)
    lease = record("3" * 32, renter_key)
    ep1 = await first.start(lease)
    await first.close()  # what a crash leaves: state dir on disk, no listener
    second = EmbeddedBackend(tmp_path, bind_host="127.0.0.1", port_range=PORTS)
    ep2 = await second.start(lease)
    assert (ep2.host_key, ep2.ssh_port) == (ep1.host_key, ep1.ssh_port)
    assert (await ssh_run("127.0.0.1", ep2.ssh_port, ep2.host_key, renter_key, "echo ok")).stdout == "ok\n"
    await second.stop(lease.lease_id)


async def test_memory_limit_applies_to_commands(backend, renter_key):
    ep = await backend.start(record("4" * 32, renter_key, memory_mb=256))
    result = await ssh_run(
        "127.0.0.1", ep.ssh_port, ep.host_key, renter_key, "python3 -c 'b = bytearray(512 * 1024 * 1024)'"
    )
    assert result.exit_status != 0 and "MemoryError" in result.stderr


async def test_extra_ports_are_reserved_from_range(backend, renter_key):
    ep = await backend.start(record("5" * 32, renter_key, extra_ports=2))
    assert len(ep.ports) == 2 and all(PORTS[0] <= p <= PORTS[1] and ep.ports[p] == p for p in ep.ports)
    assert ep.ssh_port not in ep.ports


async def test_exhausted_port_range_is_a_backend_error(tmp_path, renter_key):
    # a port free now: a fixed one lies in the kernel's ephemeral range, where any client socket of
    # the machine may hold it (CI: "no 1 free port(s) left in 41478-41478" on the first lease)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tiny = EmbeddedBackend(tmp_path, bind_host="127.0.0.1", port_range=(port, port))
    await tiny.start(record("6" * 32, renter_key))
    with pytest.raises(BackendError, match="no 1 free port"):
        await tiny.start(record("7" * 32, renter_key))
    await tiny.stop("6" * 32)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead for our purpose
        return stat.read().split()[2] != "Z"


async def test_operator_path_prefix_and_extra_env_shape_the_lease_environment(tmp_path, renter_key):
    tools = tmp_path / "tools"
    tools.mkdir()
    shaped = EmbeddedBackend(
        tmp_path,
        bind_host="127.0.0.1",
        port_range=PORTS,
        path_prefix=[tools],
        extra_env={"PYTHONPATH": "/opt/stub", "HF_HOME": "/cache"},
    )
    ep = await shaped.start(record("e" * 32, renter_key))
    result = await ssh_run(
        "127.0.0.1", ep.ssh_port, ep.host_key, renter_key, 'echo "$PATH|$PYTHONPATH|$HF_HOME"'
    )
    path, pythonpath, hf_home = result.stdout.strip().split("|")
    assert path.split(":")[0] == str(tools) and "/usr/bin" in path.split(":")
    assert (pythonpath, hf_home) == ("/opt/stub", "/cache")
    await shaped.stop("e" * 32)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"extra_env": {"HOME": "/root"}},
        {"extra_env": {"LEASE_ID": "x"}},
        {"extra_env": {"PATH": "/evil"}},
        {"extra_env": {"BAD NAME": "x"}},
        {"extra_env": {"OK": "nul\0byte"}},
        {"path_prefix": ["relative/bin"]},
        {"path_prefix": ["/a:/b"]},
    ],
)
def test_lease_environment_settings_that_would_break_a_lease_are_refused(tmp_path, kwargs):
    with pytest.raises(ValueError):
        EmbeddedBackend(tmp_path, **kwargs)
