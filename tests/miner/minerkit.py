"""Helpers for miner tests: renter keys, pinned SSH, a static metagraph, the miner fixture value."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest
from portspace import OFFSET

from compute.allocation import AllocationManager, EmbeddedBackend
from compute.chain import MetagraphSnapshot, NeuronInfo
from compute.protocol import GpuSpec, HealthRequest
from compute.transport import MinerClient, PeerUnreachable, Rejected

H100 = GpuSpec(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 10**9, uuid="GPU-0")
_PORT_BLOCKS = itertools.count()
NETUID = 5  # the simulated chain of the miner-process tests


@dataclass(frozen=True)
class RenterKey:
    private: asyncssh.SSHKey
    public_line: str


def new_renter_key() -> RenterKey:
    key = asyncssh.generate_private_key("ssh-ed25519")
    return RenterKey(key, key.export_public_key("openssh").decode().strip())


async def ssh_run(ssh, key: RenterKey, command: str) -> asyncssh.SSHCompletedProcess:
    """Run ``command`` on a lease's ``SshAccess`` with its host key pinned."""
    pinned = ([asyncssh.import_public_key(ssh.host_key)], [], [])
    async with asyncssh.connect(
        ssh.host,
        ssh.port,
        username=ssh.username,
        client_keys=[key.private],
        known_hosts=pinned,
        agent_path=None,
        config=None,
        connect_timeout=10,
    ) as conn:
        return await conn.run(command, timeout=20)


def port_block() -> tuple[int, int]:
    base = OFFSET + 42000 + (os.getpid() % 40) * 100 + (next(_PORT_BLOCKS) % 10) * 10
    return base, base + 9


@dataclass
class Miner:
    endpoint: str
    hotkey: str
    manager: AllocationManager
    backend: EmbeddedBackend


def snapshot(*neurons: tuple[str, str, float, bool]) -> MetagraphSnapshot:
    return MetagraphSnapshot(
        27,
        100,
        tuple(
            NeuronInfo(uid, hk, ck, stake, permit, None, True, 0)
            for uid, (hk, ck, stake, permit) in enumerate(neurons)
        ),
    )


def miner_args(
    tmp_path: Path, network: str, netuid: int, wallet: str = "miner", port: int = 0, backend: str = ""
) -> list[str]:
    """Flags of ``neurons/miner.py`` for a test miner under ``tmp_path`` (its wallets, data, no .env)."""
    args = ["--subtensor.network", network, "--netuid", str(netuid)]
    args += ["--wallet.path", str(tmp_path / "wallets"), "--wallet.name", wallet]
    args += ["--axon.ip", "127.0.0.1", "--axon.port", str(port or free_port())]
    args += ["--miner.backend", backend] if backend else []
    return args + ["--miner.data_dir", str(tmp_path / "data"), "--env_file", str(tmp_path / "none.env")]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


ROOT = Path(__file__).resolve().parents[2]


def start_miner(args: list[str], log: Path) -> subprocess.Popen:
    out = open(log, "ab")  # noqa: SIM115 - the child owns it; closed when the test's tmp dir goes
    return subprocess.Popen(
        [sys.executable, str(ROOT / "neurons" / "miner.py"), *args],
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def wait_healthy(
    client: MinerClient, endpoint: str, hotkey: str, proc: subprocess.Popen, log: Path
) -> None:
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"miner exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            await client.call(endpoint, hotkey, HealthRequest(), timeout=2)
            return
        except (PeerUnreachable, Rejected):
            await asyncio.sleep(0.3)
    pytest.fail(f"miner did not become healthy:\n{log.read_text()[-3000:]}")
