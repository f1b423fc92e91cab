"""A real local subnet for the operator tests: sim chain, a serving miner, two operators.

The miner is the real miner app (``compute.miner.build_miner_app``) over a real
``AllocationManager`` and rental backend (embedded asyncssh, or Docker for the ``docker``
variant), served by uvicorn on 127.0.0.1 and published on a simulated chain. Only the GPU is
pretended: the miner rents out one GPU record named like an H100 (there is no GPU here).
A second registered miner serves an axon on a closed port, so discovery meets an offline miner.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import GPU_NAME

from compute import __version__
from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore
from compute.allocation.lifecycle.health import HealthMonitor
from compute.allocation.volumes.keeper import VolumeKeeper, VolumeLimits
from compute.allocation.volumes.store import VolumeStore
from compute.chain import SimChainState, connect
from compute.miner import build_miner_app
from compute.operator import main
from compute.protocol import GpuSpec, MachineSpecs, Price
from compute.transport import AccessPolicy, serve_in_thread

NETUID = 27
FAKE_GPU = GpuSpec(index=0, name=GPU_NAME, memory_bytes=80 * 1024**3, uuid="GPU-00000000-test")


def static_specs(backend: str, gpus: list[GpuSpec]) -> Callable[[], MachineSpecs]:
    specs = MachineSpecs(
        cpu_model="test cpu",
        cpu_cores=4,
        cpu_freq_mhz=2000.0,
        ram_bytes=16 * 1024**3,
        disk_total_bytes=200 * 10**9,
        disk_free_bytes=100 * 10**9,
        gpus=gpus,
        backend=backend,
        miner_version=__version__,
    )
    return lambda: specs


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Subnet:
    chain_path: Path
    wallets_dir: Path
    root: Path
    miner_hotkey: str
    miner_uid: int
    offline_uid: int
    operators: dict[str, str]  # wallet name -> hotkey
    monitor: HealthMonitor | None = None  # the miner's lease watch (tests run its check_once)

    def flags(self, operator: str) -> list[str]:
        return [
            "--subtensor.network",
            f"sim:{self.chain_path}",
            "--netuid",
            str(NETUID),
            "--wallet.name",
            operator,
            "--wallet.path",
            str(self.wallets_dir),
            "--register.data_dir",
            str(self.root / f"register-{operator}"),
            "--register.timeout",
            "20",
        ]

    def cli(self, operator: str, *args: str) -> tuple[int, Any]:
        """Run ``register.py ARGS --json`` in-process as ``operator``; (exit code, parsed JSON)."""
        out, err = io.StringIO(), io.StringIO()
        code = main([*self.flags(operator), *args, "--json"], stdout=out, stderr=err)
        return code, json.loads(out.getvalue())


def _make_backend(kind: str, root: Path, templates=None, volumes: bool = False):
    base = random.randrange(200, 590) * 100
    if kind == "embedded":
        return EmbeddedBackend(
            root / "miner", ssh_host="127.0.0.1", bind_host="127.0.0.1", port_range=(base, base + 99)
        )
    from compute.allocation import DockerBackend

    return DockerBackend(
        image="compute-base:cpu",
        host="127.0.0.1",
        ssh_port_range=(base, base + 99),
        name_prefix=f"test-operator-{base}",
        templates=templates,
        volume_dir=root / "miner" / "volumes" if volumes else None,
        disk_dir=root / "miner" / "disks",  # lease disks where this host can (root): the size held
    )


def start_subnet(
    root: Path,
    make_wallet,
    backend_kind: str,
    gpus: list[GpuSpec],
    templates=None,
    lost_after_s: float = 600.0,
    volumes: VolumeLimits | None = None,
    price: Price | None = None,
) -> tuple[Subnet, Callable[[], None]]:
    chain_path = root / "chain.db"
    state = SimChainState.create(chain_path, netuid=NETUID, block_time=1.0)
    operators = {}
    for name in ("operator_a", "operator_b"):
        wallet = make_wallet(name)
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 1000.0, True)
        operators[name] = wallet.hotkey.ss58_address
    miner, offline = make_wallet("miner"), make_wallet("offline_miner")
    miner_uid = state.register(miner.hotkey.ss58_address, miner.coldkeypub.ss58_address, 0.0)
    offline_uid = state.register(offline.hotkey.ss58_address, offline.coldkeypub.ss58_address, 0.0)
    chain = connect(f"sim:{chain_path}", NETUID)
    backend = _make_backend(backend_kind, root, templates, volumes is not None)
    keeper = None
    if volumes is not None:
        keeper = VolumeKeeper(VolumeStore(root / "miner" / "leases.db"), backend.volumes, volumes)
    manager = AllocationManager(LeaseStore(root / "miner" / "leases.db"), backend, gpus=gpus, volumes=keeper)
    policy = AccessPolicy(chain.metagraph, min_stake=100.0, require_permit=True, refresh_s=60.0)
    monitor = HealthMonitor(manager, lost_after_s=lost_after_s)
    app = build_miner_app(
        miner.hotkey,
        policy,
        manager,
        static_specs(backend.name, gpus),
        templates=templates,
        monitor=monitor,
        price=price,
    )
    server = serve_in_thread(app, "127.0.0.1", 0)
    chain.serve(miner, "127.0.0.1", server.port)
    chain.serve(offline, "127.0.0.1", free_port())  # nothing listens there
    subnet = Subnet(
        chain_path,
        root / "wallets",
        root,
        miner.hotkey.ss58_address,
        miner_uid,
        offline_uid,
        operators,
        monitor,
    )

    def stop() -> None:
        server.stop()
        chain.close()
        if backend_kind == "docker":
            client = backend._client()
            for container in client.containers.list(all=True, filters={"name": backend.name_prefix}):
                container.remove(force=True)
            if backend.volumes is not None:
                for found in backend.volumes._found():
                    backend.volumes._remove(found.owner, found.name)

    return subnet, stop


@pytest.fixture
def subnet(tmp_path: Path, make_wallet) -> Iterator[Subnet]:
    net, stop = start_subnet(tmp_path, make_wallet, "embedded", [FAKE_GPU])
    yield net
    stop()


PRICED_GPU = Price(base_hour=0.05, gpu_hour={FAKE_GPU.name: 2.5})  # --miner.price "H100=2.50,base=0.05"


@pytest.fixture
def priced_subnet(tmp_path: Path, make_wallet) -> Iterator[Subnet]:
    """The subnet with a miner asking a price: $2.50 per H100-hour plus $0.05 per lease-hour."""
    net, stop = start_subnet(tmp_path, make_wallet, "embedded", [FAKE_GPU], price=PRICED_GPU)
    yield net
    stop()


def docker_skip_reason() -> str | None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get("compute-base:cpu")
    except Exception as exc:  # no engine, no image, no SDK: all mean "cannot run here"
        return f"Docker engine or compute-base:cpu image unavailable ({exc}); see scripts/build_base_image.sh"
    return None


@pytest.fixture
def docker_subnet(tmp_path: Path, make_wallet) -> Iterator[Subnet]:
    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    net, stop = start_subnet(tmp_path, make_wallet, "docker", [])  # no GPU to hand a container here
    yield net
    stop()


@pytest.fixture
def start_docker_subnet(tmp_path: Path, make_wallet) -> Iterator[Callable[..., Subnet]]:
    """Start a Docker-backed subnet on demand (e.g. with a template catalog); stopped at teardown."""
    stops: list[Callable[[], None]] = []

    def start(templates=None, lost_after_s: float = 600.0, volumes: VolumeLimits | None = None) -> Subnet:
        reason = docker_skip_reason()
        if reason:
            pytest.skip(reason)
        net, stop = start_subnet(tmp_path, make_wallet, "docker", [], templates, lost_after_s, volumes)
        stops.append(stop)
        return net

    yield start
    for stop in stops:
        stop()


@pytest.fixture
def slowed_start(monkeypatch):
    """Each lease start takes 0.4 s longer: the window in which a miner is making a lease, widened."""
    original = EmbeddedBackend.start

    async def start(self, lease):
        await asyncio.sleep(0.4)
        return await original(self, lease)

    monkeypatch.setattr(EmbeddedBackend, "start", start)
