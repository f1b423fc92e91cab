"""Lease states pending -> active, idempotent allocate, rollback on every failure, disk full."""

from __future__ import annotations

import asyncio
import errno
import sqlite3

import pytest
from test_manager import GPUS, OTHER, OWNER, Clock, make, request

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore
from compute.allocation.lease.failures import is_disk_full
from compute.protocol import ErrorCode, RequestFailed


class FailingBackend(EmbeddedBackend):
    """The embedded backend with a chosen failure on start."""

    fail_with: BaseException | None = None

    async def start(self, lease):  # noqa: ANN001
        if self.fail_with is not None:
            raise self.fail_with
        return await super().start(lease)


def failing(tmp_path, clock: Clock) -> AllocationManager:
    backend = FailingBackend(tmp_path / "data", bind_host="127.0.0.1", port_range=(44900, 44909))
    return AllocationManager(LeaseStore(tmp_path / "leases.db"), backend, GPUS, clock=clock)


async def test_lease_is_pending_while_its_backend_starts(tmp_path):
    manager = make(tmp_path, Clock())
    seen: list[str] = []
    original = manager.backend.start

    async def start(lease):  # noqa: ANN001
        seen.append(manager.store.get(lease.lease_id).state)
        assert manager.free_gpus() == GPUS[1:]  # the pending lease already holds its GPU
        return await original(lease)

    manager.backend.start = start  # type: ignore[method-assign]
    lease = await manager.allocate(OWNER, request(gpus=1))
    assert seen == ["pending"]
    assert manager.store.get(lease.lease_id).state == "active"
    assert manager.store.get(lease.lease_id).endpoint is not None


async def test_retry_with_the_same_idempotency_key_gets_the_same_lease(tmp_path):
    manager = make(tmp_path, Clock())
    first = request(gpus=1).model_copy(update={"idempotency_key": "retry-key-1"})
    a = await manager.allocate(OWNER, first)
    b = await manager.allocate(OWNER, first)
    assert a == b
    assert len(manager.store.live()) == 1
    other = await manager.allocate(OTHER, first)  # the key is per caller
    assert other.lease_id != a.lease_id
    assert len(await manager.backend.running()) == 2


async def test_concurrent_retries_make_one_lease(tmp_path):
    manager = make(tmp_path, Clock())
    req = request(gpus=0).model_copy(update={"idempotency_key": "concurrent-1"})
    results = await asyncio.gather(*(manager.allocate(OWNER, req) for _ in range(4)), return_exceptions=True)
    leases = {r.lease_id for r in results if not isinstance(r, BaseException)}
    refusals = [r for r in results if isinstance(r, RequestFailed)]
    assert len(leases) == 1 and len(manager.store.live()) == 1
    assert all(r.code == ErrorCode.BUSY for r in refusals)


@pytest.mark.parametrize(
    "error, code, status",
    [
        (OSError(errno.ENOSPC, "No space left on device"), ErrorCode.INSUFFICIENT_STORAGE, 507),
        (RuntimeError("docker: write /var/lib: no space left on device"), None, None),
        (asyncio.TimeoutError(), ErrorCode.BACKEND_ERROR, 503),
        (sqlite3.OperationalError("database or disk is full"), ErrorCode.INSUFFICIENT_STORAGE, 507),
    ],
)
async def test_every_start_failure_rolls_back(tmp_path, error, code, status):
    manager = failing(tmp_path, Clock())
    manager.backend.fail_with = error  # type: ignore[attr-defined]
    with pytest.raises(BaseException) as caught:
        await manager.allocate(OWNER, request(gpus=1))
    if code is not None:
        assert isinstance(caught.value, RequestFailed)
        assert (caught.value.code, caught.value.status) == (code, status)
    assert manager.store.live() == [] and manager.free_gpus() == GPUS
    assert await manager.backend.running() == set()


async def test_store_full_after_start_rolls_back_the_started_lease(tmp_path):
    manager = make(tmp_path, Clock())

    def full(*_: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    manager.store.activate = full  # type: ignore[method-assign]
    with pytest.raises(RequestFailed) as refused:
        await manager.allocate(OWNER, request(gpus=1))
    assert (refused.value.code, refused.value.status) == (ErrorCode.INSUFFICIENT_STORAGE, 507)
    assert "disk is full" in refused.value.reason
    assert manager.store.live() == [] and await manager.backend.running() == set()


async def test_cancelled_allocate_leaves_nothing(tmp_path):
    manager = make(tmp_path, Clock())
    original = manager.backend.start
    started = asyncio.Event()

    async def slow(lease):  # noqa: ANN001
        endpoint = await original(lease)
        started.set()
        await asyncio.sleep(30)
        return endpoint

    manager.backend.start = slow  # type: ignore[method-assign]
    task = asyncio.create_task(manager.allocate(OWNER, request(gpus=1)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert manager.store.live() == [] and await manager.backend.running() == set()


async def test_reconcile_rolls_back_pending_left_by_a_crash(tmp_path):
    clock = Clock()
    first = make(tmp_path, clock)
    lease, _ = await first._reserve(OWNER, request(gpus=1), request().ssh_public_key)
    await first.backend.start(lease.record)  # started, then the process died before "active"
    await first.backend.close()
    first.store.close()
    second = make(tmp_path, clock)
    await second.backend.start(lease.record)  # the container outlived the miner
    report = await second.reconcile()
    assert report["rolled_back"] == [lease.lease_id]
    assert second.store.get(lease.lease_id) is None
    assert await second.backend.running() == set() and second.free_gpus() == GPUS


async def test_sweep_spares_a_pending_lease_whose_start_is_in_flight(tmp_path):
    manager = make(tmp_path, Clock())
    original = manager.backend.start
    gate = asyncio.Event()

    async def gated(lease):  # noqa: ANN001
        await gate.wait()
        return await original(lease)

    manager.backend.start = gated  # type: ignore[method-assign]
    task = asyncio.create_task(manager.allocate(OWNER, request(gpus=1)))
    while not manager.store.pending():
        await asyncio.sleep(0.01)
    assert (await manager.sweep())["rolled_back"] == []
    gate.set()
    lease = await task
    assert manager.store.get(lease.lease_id).state == "active"


async def test_reconcile_survives_a_backend_that_cannot_list(tmp_path):
    manager = make(tmp_path, Clock())
    await manager.allocate(OWNER, request(gpus=0))

    async def broken() -> set[str]:
        raise OSError("docker socket gone")

    manager.backend.running = broken  # type: ignore[method-assign]
    report = await manager.reconcile()
    assert report["adopted"] == [] and report["failed"] == []


def test_disk_full_is_recognised_through_causes():
    try:
        try:
            raise OSError(errno.EDQUOT, "quota")
        except OSError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert is_disk_full(outer)
    assert not is_disk_full(RuntimeError("port in use"))


async def test_embedded_restart_survives_torn_files_from_a_killed_writer(tmp_path):
    clock = Clock()
    first = make(tmp_path, clock)
    lease = await first.allocate(OWNER, request(gpus=0))
    await first.backend.close()
    first.store.close()
    directory = tmp_path / "data" / "embedded" / lease.lease_id
    (directory / "state.json").write_text('{"ports": [4')  # torn by a kill -9 before atomic writes
    (directory / ".state.json.x1.tmp").write_text("partial")
    second = make(tmp_path, clock)
    report = await second.reconcile()
    assert report["restarted"] == [lease.lease_id] and report["failed"] == []
    assert not list(directory.glob(".*.tmp"))
    assert (directory / "host_key").stat().st_mode & 0o777 == 0o600


def test_write_atomic_replaces_whole_files_only(tmp_path):
    from compute.allocation.lease.atomic import write_atomic

    target = tmp_path / "f"
    write_atomic(target, b"one")
    write_atomic(target, b"two", 0o644)
    assert target.read_bytes() == b"two" and target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["f"]
