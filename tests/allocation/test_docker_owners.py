"""Several miners on one Docker engine: each DockerBackend lists, adopts and removes only its own containers.

Pure checks of the ``compute.miner`` label first; then (``docker``-marked, real engine) two backends
with different ``miner_id`` and the *same* name prefix, a manager reconcile with an empty store, and a
container made before the label existed. Skips without Docker and ``compute-base:cpu`` (fails with
``COMPUTE_REQUIRE_DOCKER=1``), like test_docker_backend.py whose helpers it reuses.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest
from test_docker_backend import ED25519, IMAGE, client_key, docker_ready, make_lease, public_line, ssh_run

from compute.allocation import AllocationManager, LeaseStore
from compute.allocation.docker.backend import DockerBackend, LeaseContainerNotFound
from compute.allocation.docker.spec import LABEL_MINER, partition_containers

__all__ = ["docker_ready"]  # the fixture, imported from test_docker_backend

MINER_A = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
MINER_B = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


# -- labels and partition (pure) ---------------------------------------------------------


def test_every_container_carries_its_miner_label_and_the_id_defaults_to_the_prefix() -> None:
    backend = DockerBackend(docker_client=object(), miner_id=MINER_A)  # never touched here
    kwargs = backend.container_kwargs(make_lease(ED25519), [40001], "ssh-ed25519 K")
    assert kwargs["labels"][LABEL_MINER] == MINER_A and kwargs["labels"]["compute.managed"] == "1"
    assert DockerBackend(docker_client=object(), name_prefix="bench-x").miner_id == "bench-x"


@pytest.mark.parametrize("bad", ["", "a b", "-x", "x" * 200, "id\n", "a=b"])
def test_unusable_miner_id_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="miner_id"):
        DockerBackend(docker_client=object(), miner_id=bad)


def test_partition_keeps_other_miners_and_unlabelled_containers_out() -> None:
    summaries = [
        {"Labels": {"compute.lease_id": "la", LABEL_MINER: MINER_A}, "Names": ["/compute-lease-la"]},
        {"Labels": {"compute.lease_id": "lb", LABEL_MINER: MINER_B}, "Names": ["/compute-lease-lb"]},
        {"Labels": {"compute.lease_id": "old"}, "Names": ["/compute-lease-old"]},
        {"Labels": {LABEL_MINER: MINER_A}, "Names": ["/no-lease-id"]},
    ]
    found = partition_containers(summaries, MINER_A)
    assert (found.ours, found.legacy, found.others) == (frozenset({"la"}), ("compute-lease-old",), 1)


# -- two miners on the real engine ---------------------------------------------------------


@pytest.fixture
async def two_miners(docker_ready: None):
    tag = uuid.uuid4().hex[:6]
    prefix = f"test-owners-{tag}"  # one prefix for both: names are not what keeps them apart
    first = DockerBackend(image=IMAGE, name_prefix=prefix, miner_id=f"miner-a-{tag}")
    second = DockerBackend(image=IMAGE, name_prefix=prefix, miner_id=f"miner-b-{tag}")
    yield first, second
    client = first._client()
    for container in client.containers.list(all=True, filters={"name": prefix}):
        container.remove(force=True, v=True)
    for backend in (first, second):
        await backend.release_network()


@pytest.mark.docker
async def test_each_miner_lists_and_reconciles_only_its_own_containers(two_miners, tmp_path: Path) -> None:
    first, second = two_miners
    key = client_key()
    mine, theirs = make_lease(public_line(key)), make_lease(public_line(key))
    _, their_endpoint = await asyncio.gather(first.start(mine), second.start(theirs))
    assert await first.running() == {mine.lease_id}
    assert await second.running() == {theirs.lease_id}

    await first.stop(theirs.lease_id)  # even given the id, a miner never touches another's container
    for call in (first.restart, first.endpoint):
        with pytest.raises(LeaseContainerNotFound, match="another miner"):
            await call(theirs.lease_id)

    manager = AllocationManager(LeaseStore(tmp_path / "first.db"), first, [])  # empty store
    try:
        report = await manager.reconcile()
    finally:
        manager.store.close()
    assert report["orphans_stopped"] == [mine.lease_id]
    assert await first.running() == set()
    assert await second.running() == {theirs.lease_id}
    assert await ssh_run(their_endpoint, key, "echo still here") == "still here\n"


@pytest.mark.docker
async def test_container_without_miner_label_is_left_alone_warned_once_and_adopted_by_its_lease(
    two_miners, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, _ = two_miners
    lease = make_lease(ED25519)
    name = first._container_name(lease.lease_id)
    port = first._pick_ports(1)[0]
    legacy = await asyncio.to_thread(
        first._client().containers.run,
        IMAGE,
        ["sleep", "600"],
        name=name,
        detach=True,
        init=True,
        ports={"22/tcp": ("127.0.0.1", port)},
        labels={
            "compute.managed": "1",
            "compute.lease_id": lease.lease_id,
            "compute.host_key": "ssh-ed25519 H",
        },
    )
    caplog.set_level(logging.WARNING, logger="compute.allocation.docker.backend")
    assert await first.running() == set()
    assert await first.running() == set()
    warnings = [r.getMessage() for r in caplog.records if "compute.miner" in r.getMessage()]
    assert len(warnings) == 1 and name in warnings[0]

    manager = AllocationManager(LeaseStore(tmp_path / "first.db"), first, [])
    try:
        assert (await manager.reconcile())["orphans_stopped"] == []
    finally:
        manager.store.close()
    legacy.reload()
    assert legacy.status == "running"

    endpoint = await first.start(lease)  # this miner's store still holds the lease: adopt, not recreate
    assert (endpoint.ssh_port, endpoint.host_key) == (port, "ssh-ed25519 H")
    assert first._client().containers.get(name).id == legacy.id
    await first.stop(lease.lease_id)  # the lease ends: its container goes
    with pytest.raises(LeaseContainerNotFound):
        await first.endpoint(lease.lease_id)
