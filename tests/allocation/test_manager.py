"""AllocationManager with a real store and the embedded backend: expiry, rollback, reconcile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from allockit import new_renter_key, ssh_run
from portspace import OFFSET

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.protocol import AllocateRequest, ErrorCode, GpuSpec, RequestFailed, Requirements

GPUS = [GpuSpec(index=i, name="NVIDIA RTX 4090", memory_bytes=24 * 10**9) for i in range(2)]
OWNER, OTHER = "5" + "A" * 47, "5" + "B" * 47
PORTS = (OFFSET + 43000 + os.getpid() % 90 * 10, OFFSET + 43000 + os.getpid() % 90 * 10 + 9)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(tmp_path: Path, clock: Clock, ports=PORTS, **limits) -> AllocationManager:
    backend = EmbeddedBackend(tmp_path / "data", bind_host="127.0.0.1", port_range=ports)
    return AllocationManager(
        LeaseStore(tmp_path / "leases.db"), backend, GPUS, ManagerLimits(**limits), clock
    )


def request(gpus: int = 1, duration_s: int = 600, key=None) -> AllocateRequest:
    return AllocateRequest(
        requirements=Requirements(gpu_count=gpus),
        duration_s=duration_s,
        ssh_public_key=(key or new_renter_key()).public_line,
    )


async def test_expired_lease_is_stopped_and_its_gpu_freed(tmp_path):
    clock = Clock()
    manager = make(tmp_path, clock)
    lease = await manager.allocate(OWNER, request(gpus=2))
    assert manager.free_gpus() == []
    clock.now += 601
    assert await manager.expire_due() == [lease.lease_id]
    assert await manager.backend.running() == set()
    status = await manager.status(OWNER, lease.lease_id)
    assert (status.state, status.ssh) == ("expired", None)
    assert manager.free_gpus() == GPUS
    with pytest.raises(RequestFailed) as refused:
        await manager.extend(OWNER, lease.lease_id, 600)
    assert (refused.value.code, refused.value.status) == (ErrorCode.LEASE_EXPIRED, 410)


async def test_lease_past_expiry_is_refused_before_the_loop_runs(tmp_path):
    clock = Clock()
    manager = make(tmp_path, clock)
    lease = await manager.allocate(OWNER, request(gpus=0))
    clock.now += 700
    with pytest.raises(RequestFailed) as refused:
        await manager.restart(OWNER, lease.lease_id)
    assert refused.value.code == ErrorCode.LEASE_EXPIRED
    assert await manager.backend.running() == set()


async def test_backend_failure_rolls_back_the_reservation(tmp_path):
    clock = Clock()
    manager = make(tmp_path, clock, ports=(PORTS[1] + 300, PORTS[1] + 300))
    await manager.allocate(OWNER, request(gpus=1))
    with pytest.raises(RequestFailed) as refused:
        await manager.allocate(OTHER, request(gpus=1))  # GPU free, but no port left
    assert (refused.value.code, refused.value.status) == (ErrorCode.BACKEND_ERROR, 503)
    assert [g.index for g in manager.free_gpus()] == [1]
    assert len(manager.store.active()) == 1


async def test_extend_beyond_maximum_is_refused(tmp_path):
    manager = make(tmp_path, Clock(), max_lease_s=3600)
    lease = await manager.allocate(OWNER, request(gpus=0, duration_s=3000))
    with pytest.raises(RequestFailed, match="maximum is 3600s"):
        await manager.extend(OWNER, lease.lease_id, 1200)
    extended = await manager.extend(OWNER, lease.lease_id, 600)
    assert extended.expires_at == lease.expires_at + 600


async def test_per_owner_cap_limits_zero_gpu_leases(tmp_path):
    manager = make(tmp_path, Clock(), max_leases_per_owner=2)
    for _ in range(2):
        await manager.allocate(OWNER, request(gpus=0))
    with pytest.raises(RequestFailed, match="already holds 2 active leases"):
        await manager.allocate(OWNER, request(gpus=0))
    await manager.allocate(OTHER, request(gpus=0))


async def test_reconcile_restarts_vanished_leases_and_stops_orphans(tmp_path):
    clock, key = Clock(), new_renter_key()
    first = make(tmp_path, clock)
    kept = await first.allocate(OWNER, request(gpus=1, key=key))
    ended = await first.allocate(OWNER, request(gpus=0, duration_s=60))
    await first.backend.close()  # the process died: listeners gone, store and host keys remain
    first.store.close()

    second = make(tmp_path, clock)
    orphan = await second.allocate(OTHER, request(gpus=0))
    second.store.end(orphan.lease_id, "released", clock.now)  # the store says ended, the backend still runs
    clock.now += 61
    report = await second.reconcile()
    assert report["restarted"] == [kept.lease_id]
    assert report["orphans_stopped"] == [orphan.lease_id]
    assert (await second.status(OWNER, ended.lease_id)).state == "expired"
    assert await second.backend.running() == {kept.lease_id}
    again = await second.status(OWNER, kept.lease_id)
    assert again.ssh == kept.ssh  # same host key and port: the renter's pin still holds
    assert (
        await ssh_run(again.ssh.host, again.ssh.port, again.ssh.host_key, key, "echo back")
    ).stdout == "back\n"


async def test_validation_leases_share_gpus_but_never_with_a_rental(tmp_path):
    """Two validators proving one miner at once both get their lease (an honest miner is never
    "busy" for a validator: the proofs decide); a renter never shares a GPU with anything."""
    clock = Clock()
    manager = make(tmp_path, clock)

    def validation(gpus: int) -> AllocateRequest:
        return request(gpus=gpus).model_copy(update={"purpose": "validation"})

    first = await manager.allocate(OWNER, validation(2))
    second = await manager.allocate(OTHER, validation(2))
    assert [g.index for g in first.gpus] == [g.index for g in second.gpus] == [0, 1]
    assert manager.free_gpus() == [] and manager.free_gpus("validation") == GPUS
    with pytest.raises(RequestFailed) as refused:
        await manager.allocate(OWNER, request(gpus=1))  # a rental waits for the validations to end
    assert refused.value.code == ErrorCode.NO_CAPACITY
    await manager.deallocate(OWNER, first.lease_id)
    await manager.deallocate(OTHER, second.lease_id)
    rental = await manager.allocate(OWNER, request(gpus=1))
    with pytest.raises(RequestFailed) as refused:
        await manager.allocate(OTHER, validation(2))  # a rented GPU is never handed to a validator
    assert refused.value.code == ErrorCode.NO_CAPACITY
    shared = await manager.allocate(OTHER, validation(1))  # the free one is
    assert [g.index for g in shared.gpus] != [g.index for g in rental.gpus]
    await manager.deallocate(OWNER, rental.lease_id)
    await manager.deallocate(OTHER, shared.lease_id)


async def test_a_lease_beside_the_tenants_shares_the_rented_gpus_first(tmp_path):
    """A validator's presence proof of rented GPUs: its lease shares the GPUs renters hold (the
    rented ones first), so a rented GPU is proven without its tenant leaving; a renter still never
    gets a GPU any live lease holds."""
    manager = make(tmp_path, Clock())
    rental = await manager.allocate(OWNER, request(gpus=1))
    beside = await manager.allocate(OTHER, request(gpus=1).model_copy(update={"purpose": "beside"}))
    assert [g.index for g in beside.gpus] == [g.index for g in rental.gpus] and beside.purpose == "beside"
    both = await manager.allocate(OTHER, request(gpus=2).model_copy(update={"purpose": "beside"}))
    assert [g.index for g in both.gpus][0] == rental.gpus[0].index  # the rented GPU first
    with pytest.raises(RequestFailed) as refused:
        await manager.allocate(OWNER, request(gpus=1))  # every GPU held: no rental shares one
    assert refused.value.code == ErrorCode.NO_CAPACITY
    for lease, owner in ((rental, OWNER), (beside, OTHER), (both, OTHER)):
        await manager.deallocate(owner, lease.lease_id)
