"""The miner on a real Docker engine: neurons/miner.py with ``--miner.backend docker`` on a sim chain.

Real process, real signed transport (``MinerClient``), real wallets, real containers reached over
SSH with the pinned host key. Expiry is shown without waiting a minute: the test moves a lease's
expiry in the miner's own store (as if time had passed) and lets the miner's expiry loop (every
5 s) or its start-up reconcile act; the manager-level tests use an injected clock instead.
Needs Docker and ``compute-base:cpu``; skips otherwise (fails with ``COMPUTE_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path

import asyncssh
import pytest
from dockerkit import (
    IMAGE,
    LIMITS_PROBE,
    Janitor,
    parse_limits,
    require_docker,
    stop_miner,
)
from minerkit import free_port, new_renter_key, port_block, ssh_run, start_miner, wait_healthy

from compute.allocation import AllocationManager, LeaseRecord, LeaseStore, ManagerLimits
from compute.allocation.docker.backend import DockerBackend
from compute.chain import SimChainState
from compute.protocol import (
    AllocateRequest,
    DeallocateRequest,
    ErrorCode,
    ExchangeKeyRequest,
    LeaseStatusRequest,
    ListLeasesRequest,
    RequestFailed,
    Requirements,
    SpecsRequest,
)
from compute.transport import MinerClient, Rejected

NETUID = 5
pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker_ready() -> None:
    require_docker()


@pytest.fixture
def janitor(docker_ready: None, wallets):
    janitor = Janitor([wallets[n].hotkey.ss58_address for n in ("validator", "stranger")])
    yield janitor
    janitor.clean()


class MinerProcess:
    """neurons/miner.py with the docker backend; ``start`` waits until it answers signed health checks."""

    def __init__(self, tmp_path: Path, client: MinerClient, hotkey: str) -> None:
        port, (low, high) = free_port(), port_block()
        self.args = [
            "--subtensor.network",
            f"sim:{tmp_path / 'chain.db'}",
            "--netuid",
            str(NETUID),
            "--wallet.path",
            str(tmp_path / "wallets"),
            "--wallet.name",
            "miner",
            "--axon.ip",
            "127.0.0.1",
            "--axon.port",
            str(port),
            "--miner.backend",
            "docker",
            "--miner.base_image",
            IMAGE,
            "--miner.data_dir",
            str(tmp_path / "data"),
            "--miner.ssh_port_range",
            f"{low}-{high}",
            "--miner.max_memory_gb",
            "2",
            "--miner.max_lease_days",
            "1",
            "--env_file",
            str(tmp_path / "none.env"),
            *([] if os.geteuid() == 0 else ["--miner.disk_cap_advisory"]),  # lease disks need root
        ]
        self.endpoint, self.hotkey, self.client = f"127.0.0.1:{port}", hotkey, client
        self.log, self.db = tmp_path / "miner.log", tmp_path / "data" / "leases.db"
        self.proc = None

    async def start(self) -> None:
        self.proc = start_miner(self.args, self.log)
        await wait_healthy(self.client, self.endpoint, self.hotkey, self.proc, self.log)

    def set_expiry(self, lease_id: str, expires_at: float) -> None:
        """Move a lease's expiry in the miner's store, as if the clock had run on."""
        store = LeaseStore(self.db)
        try:
            store.set_expiry(lease_id, expires_at)
        finally:
            store.close()


@pytest.fixture
async def miner(tmp_path: Path, wallets, janitor: Janitor):
    state = SimChainState.create(tmp_path / "chain.db", netuid=NETUID, block_time=1.0)
    for name, permit in (("miner", False), ("validator", True), ("stranger", True)):
        wallet = wallets[name]
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0, permit)
    async with MinerClient(wallets["validator"], timeout=60) as client:
        process = MinerProcess(tmp_path, client, wallets["miner"].hotkey.ss58_address)
        yield process
        if process.proc is not None:
            stop_miner(process.proc)


@pytest.fixture
async def stranger(wallets):
    async with MinerClient(wallets["stranger"], timeout=30) as client:
        yield client


def allocate(key, memory_gb: float = 0.5, duration_s: int = 600) -> AllocateRequest:
    return AllocateRequest(
        requirements=Requirements(gpu_count=0, cpu_count=1, memory_gb=memory_gb),
        duration_s=duration_s,
        ssh_public_key=key.public_line,
    )


async def assert_not_owner(stranger: MinerClient, miner: MinerProcess, lease_id: str) -> None:
    for request in (
        LeaseStatusRequest(lease_id=lease_id),
        DeallocateRequest(lease_id=lease_id),
        ExchangeKeyRequest(lease_id=lease_id, ssh_public_key=new_renter_key().public_line),
    ):
        with pytest.raises(Rejected) as refused:
            await stranger.call(miner.endpoint, miner.hotkey, request)
        assert (refused.value.status, refused.value.code) == (403, ErrorCode.NOT_OWNER)
    assert (await stranger.call(miner.endpoint, miner.hotkey, ListLeasesRequest())).leases == []


def orphan_record(owner: str, public_key: str) -> LeaseRecord:
    now = time.time()
    return LeaseRecord(
        lease_id=f"orphan{uuid.uuid4().hex[:10]}",
        owner_hotkey=owner,
        purpose="rental",
        gpus=(),
        cpu_count=1,
        memory_mb=256,
        disk_gb=1,
        shm_mb=0,
        extra_ports=0,
        ssh_public_key=public_key,
        created_at=now,
        expires_at=now + 3600,
    )


BAD_REQUESTS = [
    ({"gpu_count": 64}, 600, 409, ErrorCode.UNSUPPORTED, "requested 64 GPUs; this machine rents out"),
    ({"memory_gb": 64}, 600, 409, ErrorCode.UNSUPPORTED, "at most 2.0 GB"),
    ({"memory_gb": -5}, 600, 422, ErrorCode.INVALID_REQUEST, "requirements.memory_gb"),
    ({"cpu_count": -1}, 600, 422, ErrorCode.INVALID_REQUEST, "requirements.cpu_count"),
    ({}, 10**9, 422, ErrorCode.INVALID_REQUEST, "duration_s"),
    ({}, 5, 422, ErrorCode.INVALID_REQUEST, "duration_s"),
    ({}, 2 * 86400, 400, ErrorCode.INVALID_REQUEST, "maximum of 86400s"),
]


async def test_docker_lease_through_miner_limits_ownership_expiry_and_release(
    miner, stranger, janitor, wallets
):
    owner, key = miner.client, new_renter_key()
    orphan = orphan_record(owner.hotkey, key.public_line)  # this miner's container, unknown to its store
    foreign = orphan_record(owner.hotkey, key.public_line)  # another miner's, on the same engine
    await DockerBackend(image=IMAGE, ssh_port_range=port_block(), miner_id=miner.hotkey).start(orphan)
    await DockerBackend(image=IMAGE, ssh_port_range=port_block(), miner_id="another-miner").start(foreign)
    assert janitor.container(orphan.lease_id) is not None
    await miner.start()
    assert janitor.container(orphan.lease_id) is None  # reconcile at start removed it
    survivor = janitor.container(foreign.lease_id)
    assert survivor is not None and survivor.status == "running"  # and left the other miner's alone
    survivor.remove(force=True, v=True)
    lease = (await owner.call(miner.endpoint, miner.hotkey, allocate(key))).lease
    assert (lease.state, lease.owner_hotkey, lease.ssh.username) == ("active", owner.hotkey, "root")
    cpus, memory = parse_limits((await ssh_run(lease.ssh, key, LIMITS_PROBE)).stdout)
    assert (cpus, memory) == (1.0, 512 * 1024 * 1024)
    specs = (await owner.call(miner.endpoint, miner.hotkey, SpecsRequest())).specs
    assert specs.disk_cap == ("kernel" if os.geteuid() == 0 else "watched")
    if os.geteuid() == 0:  # its own filesystem of the lease's size (5 GB asked): df / shows it
        size_kib = int((await ssh_run(lease.ssh, key, "df -k / | tail -1")).stdout.split()[1])
        assert 4.5 * 1024**2 < size_kib <= 5 * 1024**2
    assert (await ssh_run(lease.ssh, key, "echo hello from $(hostname)")).stdout.startswith(
        "hello from lease-"
    )
    await assert_not_owner(stranger, miner, lease.lease_id)

    for fields, duration_s, status, code, says in BAD_REQUESTS:
        request = AllocateRequest.model_construct(
            requirements=Requirements.model_construct(**{**Requirements().model_dump(), **fields}),
            duration_s=duration_s,
            ssh_public_key=key.public_line,
            purpose="rental",
            kind="allocate",
            protocol_version=1,
        )
        with pytest.raises(Rejected) as refused:
            await owner.call(miner.endpoint, miner.hotkey, request)
        assert (refused.value.status, refused.value.code) == (status, code), refused.value.reason
        assert says in refused.value.reason
    assert [c.labels["compute.lease_id"] for c in janitor.containers()] == [lease.lease_id]

    due = (await owner.call(miner.endpoint, miner.hotkey, allocate(key))).lease
    miner.set_expiry(due.lease_id, time.time())
    assert await janitor.wait_gone(due.lease_id, within_s=12), "the expiry loop did not remove the container"
    ended = (await owner.call(miner.endpoint, miner.hotkey, LeaseStatusRequest(lease_id=due.lease_id))).lease
    assert (ended.state, ended.ssh) == ("expired", None)

    await owner.call(miner.endpoint, miner.hotkey, DeallocateRequest(lease_id=lease.lease_id))
    assert janitor.container(lease.lease_id) is None
    released = (
        await owner.call(miner.endpoint, miner.hotkey, LeaseStatusRequest(lease_id=lease.lease_id))
    ).lease
    assert (released.state, released.ssh) == ("released", None)
    with pytest.raises((OSError, asyncssh.Error)):
        await ssh_run(lease.ssh, key, "true")
    miner.proc.send_signal(signal.SIGTERM)
    assert miner.proc.wait(15) == 0


async def test_docker_lease_survives_miner_kill_9_and_restart(miner, stranger, janitor):
    owner, key = miner.client, new_renter_key()
    await miner.start()
    responses = await asyncio.gather(
        *(owner.call(miner.endpoint, miner.hotkey, allocate(key)) for _ in range(3))
    )
    kept, lapsing, halted = (response.lease for response in responses)
    container_id = janitor.container(kept.lease_id).id

    miner.proc.kill()
    miner.proc.wait(10)
    survivor = janitor.container(kept.lease_id)
    assert (survivor.id, survivor.status) == (container_id, "running")
    assert (
        await ssh_run(kept.ssh, key, "echo while the miner is dead")
    ).stdout == "while the miner is dead\n"
    miner.set_expiry(lapsing.lease_id, time.time() - 1)  # ran out while the miner was down
    halted_id = janitor.container(halted.lease_id).id
    await asyncio.to_thread(
        janitor.container(halted.lease_id).stop, timeout=1
    )  # exited while the miner was down

    await miner.start()
    after = (await owner.call(miner.endpoint, miner.hotkey, LeaseStatusRequest(lease_id=kept.lease_id))).lease
    assert (after.state, after.owner_hotkey, after.ssh) == ("active", owner.hotkey, kept.ssh)
    assert janitor.container(kept.lease_id).id == container_id
    assert (await ssh_run(after.ssh, key, "echo after")).stdout == "after\n"  # same pinned host key
    await assert_not_owner(stranger, miner, kept.lease_id)
    assert janitor.container(lapsing.lease_id) is None
    lapsed = (
        await owner.call(miner.endpoint, miner.hotkey, LeaseStatusRequest(lease_id=lapsing.lease_id))
    ).lease
    assert lapsed.state == "expired"
    resumed = (
        await owner.call(miner.endpoint, miner.hotkey, LeaseStatusRequest(lease_id=halted.lease_id))
    ).lease
    assert (resumed.state, resumed.ssh, janitor.container(halted.lease_id).id) == (
        "active",
        halted.ssh,
        halted_id,
    )
    assert (await ssh_run(resumed.ssh, key, "echo resumed")).stdout == "resumed\n"

    await owner.call(miner.endpoint, miner.hotkey, DeallocateRequest(lease_id=kept.lease_id))
    assert janitor.container(kept.lease_id) is None
    miner.proc.send_signal(signal.SIGTERM)
    assert miner.proc.wait(15) == 0


# -- the manager on DockerBackend, with an injected clock --------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def docker_manager(tmp_path: Path, docker_ready: None):
    clock = Clock()
    backend = DockerBackend(image=IMAGE, ssh_port_range=port_block(), name_prefix=f"t-{uuid.uuid4().hex[:8]}")
    manager = AllocationManager(
        LeaseStore(tmp_path / "leases.db"), backend, [], ManagerLimits(max_active_leases=1), clock
    )
    yield manager, clock
    client = backend._client()
    for container in client.containers.list(all=True, filters={"name": backend.name_prefix}):
        container.remove(force=True, v=True)
    manager.store.close()


async def test_two_allocations_racing_for_the_last_slot_yield_one_container(docker_manager, wallets):
    manager, _ = docker_manager
    key = new_renter_key()
    owners = [wallets[name].hotkey.ss58_address for name in ("validator", "stranger")]
    results = await asyncio.gather(
        *(manager.allocate(owner, allocate(key)) for owner in owners), return_exceptions=True
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, RequestFailed)]
    assert (len(winners), len(losers)) == (1, 1), results
    assert (losers[0].code, losers[0].status) == (ErrorCode.NO_CAPACITY, 409)
    assert await manager.backend.running() == {winners[0].lease_id}
    assert (await ssh_run(winners[0].ssh, key, "echo won")).stdout == "won\n"


async def test_expire_due_removes_the_docker_container(docker_manager, wallets):
    manager, clock = docker_manager
    key, owner = new_renter_key(), wallets["validator"].hotkey.ss58_address
    lease = await manager.allocate(owner, allocate(key, duration_s=60))
    clock.now += 59
    assert await manager.expire_due() == []
    clock.now += 2
    assert await manager.expire_due() == [lease.lease_id]
    assert await manager.backend.running() == set()
    assert (await manager.status(owner, lease.lease_id)).state == "expired"


async def test_stopped_container_resumes_with_its_host_key_and_a_removed_one_is_recreated(
    docker_manager, wallets
):
    manager, _ = docker_manager
    key, owner = new_renter_key(), wallets["validator"].hotkey.ss58_address
    lease = await manager.allocate(owner, allocate(key))
    containers, name = manager.backend._client().containers, f"{manager.backend.name_prefix}-{lease.lease_id}"
    await asyncio.to_thread(containers.get(name).stop, timeout=1)
    assert (await manager.restart(owner, lease.lease_id)).ssh == lease.ssh
    assert (await ssh_run(lease.ssh, key, "echo back")).stdout == "back\n"
    await asyncio.to_thread(containers.get(name).remove, force=True)
    assert (await manager.reconcile())["restarted"] == [lease.lease_id]
    fresh = (await manager.status(owner, lease.lease_id)).ssh
    assert fresh.host_key != lease.ssh.host_key  # a new container gets a new host key, given in status
    assert (await ssh_run(fresh, key, "echo fresh")).stdout == "fresh\n"
