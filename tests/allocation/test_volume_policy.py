"""Volume policy without Docker: wire validation, the renter's --volume flag, caps, ownership, one
lease at a time, retention, and the embedded backend's refusal. The keeper runs over a real SQLite
store and a recording driver (the Docker side is tested in test_volumes_lifecycle and
tests/operator/test_volumes_docker)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore
from compute.allocation.lease.records import LeaseRecord
from compute.allocation.lease.store import StoredLease
from compute.allocation.volumes.driver import docker_volume_name
from compute.allocation.volumes.keeper import VolumeKeeper, VolumeLimits
from compute.allocation.volumes.store import VolumeStore
from compute.operator.errors import UsageError
from compute.operator.volumes import parse_volume
from compute.protocol import (
    AllocateRequest,
    DeleteVolumeRequest,
    ErrorCode,
    RequestFailed,
    Requirements,
    VolumeRequest,
)

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
BOB = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


@pytest.mark.parametrize("name", ["", "-x", "A", "a b", "a/b", "../x", "a" * 33, "x\n", "é"])
def test_bad_volume_names_are_refused_on_the_wire(name: str) -> None:
    with pytest.raises(ValidationError):
        VolumeRequest(name=name)
    with pytest.raises(ValidationError):
        DeleteVolumeRequest(name=name)


@pytest.mark.parametrize("size", [0, 0.05, -1, 65537, float("nan"), float("inf")])
def test_volume_sizes_out_of_bounds_are_refused(size: float) -> None:
    with pytest.raises(ValidationError):
        VolumeRequest(name="data", size_gb=size)


def test_requirements_without_a_volume_keep_their_old_wire_form() -> None:
    assert "volume" not in Requirements().model_dump_json()
    asked = Requirements(volume=VolumeRequest(name="data_1", size_gb=20))
    assert Requirements.model_validate_json(asked.model_dump_json()) == asked


@pytest.mark.parametrize(
    ("text", "expected"),
    [("data", VolumeRequest(name="data")), ("ds-1:50", VolumeRequest(name="ds-1", size_gb=50.0))],
)
def test_volume_flag_parses_name_and_size(text: str, expected: VolumeRequest) -> None:
    assert parse_volume(text) == expected


@pytest.mark.parametrize("text", ["Data", "x:", "x:big", "x:0", "x:1:2", "a b:3"])
def test_volume_flag_refuses_bad_input_with_the_rule(text: str) -> None:
    with pytest.raises(UsageError, match="NAME\\[:SIZE_GB\\]"):
        parse_volume(text)


def test_docker_names_differ_per_miner_owner_and_name() -> None:
    names = {
        docker_volume_name(miner, owner, name)
        for miner in ("m1", "m2")
        for owner in (ALICE, BOB)
        for name in ("a", "b")
    }
    assert len(names) == 8 and all(n.startswith("compute-vol-") for n in names)


class Driver:
    """Records what the keeper asked of the engine."""

    quota = "hard"

    def __init__(self) -> None:
        self.volumes: dict[tuple[str, str], float] = {}

    async def create(self, owner: str, name: str, size_gb: float) -> None:
        self.volumes[(owner, name)] = size_gb

    async def remove(self, owner: str, name: str) -> None:
        del self.volumes[(owner, name)]

    async def usage_gb(self, owner: str, name: str) -> float | None:
        return 0.0

    async def found(self) -> list:
        return []


def live(owner: str, volume: str, lease_id: str = "a" * 32) -> StoredLease:
    record = LeaseRecord(lease_id, owner, "rental", (), 1, 256, 5, 64, 0, "k", 0.0, 9e9, volume=volume)
    return StoredLease(record, "active", "{}")


@pytest.fixture
def keeper(tmp_path: Path):
    clock = [1000.0]
    limits = VolumeLimits(max_total_gb=30, max_per_renter_gb=20, max_per_renter=2, retention_s=100)
    yield VolumeKeeper(VolumeStore(tmp_path / "v.db"), Driver(), limits, lambda: clock[0]), clock


async def refused(call, code: str) -> RequestFailed:
    with pytest.raises(RequestFailed) as caught:
        await call
    assert caught.value.code == code, caught.value.reason
    return caught.value


async def test_caps_per_renter_and_per_miner_are_enforced(keeper) -> None:
    keeper, _ = keeper
    await keeper.claim(ALICE, VolumeRequest(name="a", size_gb=15), [])
    failed = await refused(
        keeper.claim(ALICE, VolumeRequest(name="b", size_gb=6), []), ErrorCode.VOLUME_QUOTA
    )
    assert "20 GB of volumes per renter" in failed.reason
    await keeper.claim(ALICE, VolumeRequest(name="b", size_gb=5), [])
    failed = await refused(
        keeper.claim(ALICE, VolumeRequest(name="c", size_gb=0.1), []), ErrorCode.VOLUME_QUOTA
    )
    assert "2 volumes" in failed.reason
    failed = await refused(keeper.claim(BOB, VolumeRequest(name="a", size_gb=11), []), ErrorCode.VOLUME_QUOTA)
    assert "no room" in failed.reason  # 20 + 11 > 30 for the whole miner
    assert keeper.driver.volumes == {(ALICE, "a"): 15, (ALICE, "b"): 5}


async def test_a_volume_serves_one_lease_and_only_its_owner(keeper) -> None:
    keeper, _ = keeper
    await keeper.claim(ALICE, VolumeRequest(name="data", size_gb=1), [])
    await refused(
        keeper.claim(ALICE, VolumeRequest(name="data"), [live(ALICE, "data")]), ErrorCode.VOLUME_BUSY
    )
    await refused(keeper.delete(ALICE, "data", [live(ALICE, "data")]), ErrorCode.VOLUME_BUSY)
    failed = await refused(keeper.delete(BOB, "data", []), ErrorCode.VOLUME_NOT_FOUND)
    assert ALICE not in failed.reason
    assert await keeper.infos(BOB, [live(ALICE, "data")]) == []
    await keeper.claim(BOB, VolumeRequest(name="data", size_gb=1), [live(ALICE, "data")])  # Bob's own
    await refused(keeper.claim(ALICE, VolumeRequest(name="data", size_gb=2), []), ErrorCode.INVALID_REQUEST)
    await keeper.delete(ALICE, "data", [])
    assert keeper.driver.volumes == {(BOB, "data"): 1}


async def test_retention_starts_when_the_last_lease_ends(keeper) -> None:
    keeper, clock = keeper
    await keeper.claim(ALICE, VolumeRequest(name="data", size_gb=1), [])
    clock[0] += 500  # attached all this time: never expires while a lease uses it
    assert await keeper.expire_due([live(ALICE, "data")]) == []
    await keeper.released(live(ALICE, "data"))
    (info,) = await keeper.infos(ALICE, [])
    assert info.expires_at == clock[0] + 100 and info.attached_lease is None
    clock[0] += 99
    assert await keeper.expire_due([]) == []
    clock[0] += 2
    assert await keeper.expire_due([]) == [f"{ALICE}/data"] and keeper.driver.volumes == {}


async def test_embedded_backend_refuses_volume_requests_clearly(tmp_path: Path) -> None:
    backend = EmbeddedBackend(tmp_path / "emb", ssh_host="127.0.0.1", bind_host="127.0.0.1")
    manager = AllocationManager(LeaseStore(tmp_path / "l.db"), backend, gpus=[])
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBXoN0sSuMR4XUqQlmg1KlsYRkMbf7FV7vLfSG1pCpD5"
    asked = AllocateRequest(
        requirements=Requirements(volume=VolumeRequest(name="data")), duration_s=600, ssh_public_key=key
    )
    failed = await refused(manager.allocate(ALICE, asked), ErrorCode.UNSUPPORTED)
    assert "offers no persistent volumes" in failed.reason
    assert manager.check(asked.requirements).available is False
    assert manager.store.live() == [] and time.time() > 0
