"""A slow or silent Docker host never freezes the miner.

The real ``neurons/miner.py`` with a hosts file of two hosts: this machine's engine, and the same
engine behind ``slowengine.SlowEngine``, a proxy that can turn slow (the engine's answers one
byte a second) or silent. Before, a dripping host kept the miner from ever starting, and once
running, six stuck calls took the default thread pool: health answered 1 of 16 calls. Now each
host has its own threads and a deadline per call: the miner starts, keeps answering (p95 <= 1 s)
while a host drips or is silent, reports that host down, and takes it back when it recovers.
``ssh://`` hosts are reached with a bounded connect.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from portspace import OFFSET
from slowengine import SlowEngine

from compute.allocation.hosts.check import check_host
from compute.allocation.hosts.config import parse_hosts
from compute.chain import SimChainState
from compute.protocol import HealthRequest, SpecsRequest
from compute.transport import MinerClient

REPO = Path(__file__).resolve().parents[2]
IMAGE = "compute-base:cpu"
NETUID = 5


def _docker_or_skip() -> None:
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.images.get(IMAGE)
        client.close()
    except Exception as exc:  # noqa: BLE001 - any reason: no engine here
        if os.environ.get("COMPUTE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"COMPUTE_REQUIRE_DOCKER=1 but Docker or {IMAGE} is missing: {exc}")
        pytest.skip(f"Docker or {IMAGE} missing: {exc}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MinerProcess:
    def __init__(self, tmp_path: Path, make_wallet, slow: SlowEngine) -> None:
        state = SimChainState.create(tmp_path / "chain.db", netuid=NETUID, block_time=1.0)
        self.wallets = {name: make_wallet(name) for name in ("miner", "validator")}
        for name, permit in (("miner", False), ("validator", True)):
            w = self.wallets[name]
            state.register(w.hotkey.ss58_address, w.coldkeypub.ss58_address, 5000.0, permit)
        base = OFFSET + 46000 + (os.getpid() % 20) * 40
        hosts = {"hosts": [
            {"name": "rack-a", "endpoint": "unix:///var/run/docker.sock", "gpus": [], "ssh_host": "127.0.0.1",
             "ssh_port_range": f"{base}-{base + 19}", "isolate": False},
            {"name": "rack-b", "endpoint": slow.endpoint, "gpus": [], "ssh_host": "127.0.0.1",
             "ssh_port_range": f"{base + 20}-{base + 39}", "isolate": False, "deadline_s": 5},
        ]}  # fmt: skip
        (tmp_path / "hosts.yaml").write_text(yaml.safe_dump(hosts))
        self.port = _free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.hotkey = self.wallets["miner"].hotkey.ss58_address
        self.log = tmp_path / "miner.log"
        argv = [
            sys.executable, str(REPO / "neurons" / "miner.py"), "--subtensor.network", f"sim:{tmp_path / 'chain.db'}",
            "--netuid", str(NETUID), "--wallet.path", str(tmp_path / "wallets"), "--wallet.name", "miner",
            "--axon.ip", "127.0.0.1", "--axon.port", str(self.port), "--miner.backend", "docker",
            "--miner.base_image", IMAGE, "--miner.hosts_file", str(tmp_path / "hosts.yaml"),
            "--miner.host_check_interval", "5", "--miner.health_interval", "5", "--miner.volume_max_gb", "0",
            "--miner.data_dir", str(tmp_path / "data"), "--env_file", str(tmp_path / "none.env"),
        ]  # fmt: skip
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)}
        )  # fmt: skip

    async def serving(self, client: MinerClient, within: float) -> float:
        """Seconds from start until the miner answered health (fails after ``within``)."""
        while time.monotonic() - self.started < within:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                await client.call(self.endpoint, self.hotkey, HealthRequest(), timeout=2)
                return time.monotonic() - self.started
            except Exception:  # noqa: BLE001 - not up yet
                await asyncio.sleep(0.3)
        raise AssertionError(f"miner not serving after {within:.0f}s:\n{self.log.read_text()[-3000:]}")

    async def health_latencies(self, client: MinerClient, seconds: float) -> list[float]:
        """Health calls at ~1 Hz for ``seconds``: each one's latency (inf when unanswered in 5 s)."""
        times = []
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            started = time.monotonic()
            try:
                await client.call(self.endpoint, self.hotkey, HealthRequest(), timeout=5)
                times.append(time.monotonic() - started)
            except Exception:  # noqa: BLE001 - an unanswered call is the failure measured here
                times.append(float("inf"))
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        return times

    async def host_up(self, client: MinerClient, name: str) -> bool:
        specs = (await client.call(self.endpoint, self.hotkey, SpecsRequest(), timeout=10)).specs
        return next(h.up for h in specs.hosts if h.name == name)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def p95(times: list[float]) -> float:
    return sorted(times)[int(0.95 * (len(times) - 1))]


@pytest.fixture
def slow(tmp_path: Path):
    _docker_or_skip()
    engine = SlowEngine(tmp_path / "rack-b.sock")
    yield engine
    engine.close()


@pytest.mark.docker
async def test_a_dripping_host_does_not_keep_the_miner_from_starting(
    tmp_path: Path, make_wallet, slow
) -> None:
    slow.mode = "drip"
    miner = MinerProcess(tmp_path, make_wallet, slow)
    try:
        async with MinerClient(miner.wallets["validator"], timeout=10) as client:
            took = await miner.serving(client, within=60)
            assert took < 45, f"serving only after {took:.0f}s"
            assert await miner.host_up(client, "rack-a") is True
            assert await miner.host_up(client, "rack-b") is False
    finally:
        miner.stop()


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["drip", "silent"])
async def test_a_host_turning_slow_never_stalls_the_miners_answers(
    tmp_path: Path, make_wallet, slow, mode
) -> None:
    miner = MinerProcess(tmp_path, make_wallet, slow)
    try:
        async with MinerClient(miner.wallets["validator"], timeout=10) as client:
            await miner.serving(client, within=60)
            assert await miner.host_up(client, "rack-b") is True
            slow.mode = mode  # the host turns slow while the miner runs
            times = await miner.health_latencies(client, 25)
            assert all(t != float("inf") for t in times), times  # every call answered
            assert p95(times) <= 1.0, times
            assert await miner.host_up(client, "rack-b") is False  # reported down
            assert await miner.host_up(client, "rack-a") is True
            slow.mode = "pass"
            deadline = time.monotonic() + 30
            while not await miner.host_up(client, "rack-b"):  # and taken back once it answers again
                assert time.monotonic() < deadline, miner.log.read_text()[-3000:]
                await asyncio.sleep(1)
    finally:
        miner.stop()


@pytest.mark.slow
def test_an_ssh_host_that_never_answers_is_down_within_its_connect_timeout(tmp_path: Path) -> None:
    listener = socket.socket()  # takes the connection, never sends an SSH banner
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    (config,) = parse_hosts({"hosts": [{
        "name": "far", "endpoint": f"ssh://nobody@127.0.0.1:{port}", "gpus": [], "ssh_host": "127.0.0.1",
        "isolate": False,
    }]})  # fmt: skip
    started = time.monotonic()
    try:
        result = check_host(config, IMAGE)
    finally:
        listener.close()
    assert result.up is False and time.monotonic() - started < 25, result
