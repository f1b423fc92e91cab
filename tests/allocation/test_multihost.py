"""Multi-host miner without Docker: the hosts file, placement across hosts, down hosts, the store column.

Each host's backend is an embedded backend (real asyncssh servers on 127.0.0.1) and the host check
is replaced (only the GPU is mocked): what is tested is the routing and placement, not Docker.
The real two-engine test is ``test_multihost_docker``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from allockit import new_renter_key, ssh_run
from portspace import OFFSET

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore
from compute.allocation.hosts.backend import MultiHostBackend
from compute.allocation.hosts.check import HostCheck, parse_smi
from compute.allocation.hosts.config import HostConfig, HostsFileError, load_hosts, parse_hosts
from compute.allocation.lifecycle.hostwatch import check_and_recover
from compute.protocol import AllocateRequest, ErrorCode, GpuSpec, RequestFailed, Requirements

OWNER = "5" + "A" * 47
BASE = OFFSET + 46000 + os.getpid() % 50 * 20


def _entry(name: str, gpus: list[int], **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "endpoint": f"unix:///run/{name}.sock",
        "gpus": gpus,
        "ssh_host": "127.0.0.1",
        **extra,
    }


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"endpoint": "tcp://10.0.0.2:2376", "isolate": False}, "needs tls"),
        ({"endpoint": "ssh://root@gpu2"}, "explicit isolate: false"),
        ({"endpoint": "ssh://root@gpu2", "isolate": True}, "isolate: true needs"),
        ({"endpoint": "http://gpu2:2375"}, "expected unix:///path"),
        ({"gpus": [0, 0]}, "distinct device indices"),
        ({"ssh_port_range": "80-90"}, "1024 <= LOW"),
        ({"name": "Bad_Name"}, "host names are"),
        ({"tls": {"ca": "/nope/ca.pem", "cert": "/nope/c.pem", "key": "/nope/k.pem"}}, "not found"),
        ({"colour": "red"}, "Extra inputs"),
    ],
)
def test_bad_hosts_entries_are_refused_with_a_clear_reason(entry: dict[str, object], says: str) -> None:
    with pytest.raises(HostsFileError) as refused:
        parse_hosts({"hosts": [{**_entry("a", [0]), **entry}]}, "hosts.yaml")
    assert says in str(refused.value) and "hosts.yaml" in str(refused.value)


def test_hosts_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(HostsFileError, match="repeated: a"):
        parse_hosts({"hosts": [_entry("a", [0]), _entry("a", [1])]})
    with pytest.raises(HostsFileError, match="at most 64 GPUs"):
        parse_hosts({"hosts": [_entry("a", list(range(40))), _entry("b", list(range(40)))]})
    with pytest.raises(HostsFileError, match="cannot read"):
        load_hosts(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [\n")
    with pytest.raises(HostsFileError, match="not valid YAML"):
        load_hosts(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(HostsFileError, match="bad.yaml"):
        load_hosts(bad)


def test_gpu_indices_are_miner_wide_in_file_order(tmp_path: Path) -> None:
    file = tmp_path / "hosts.yaml"
    file.write_text(
        "hosts:\n"
        "  - {name: a, endpoint: 'unix:///run/a.sock', gpus: [3, 5], ssh_host: 127.0.0.1}\n"
        "  - {name: b, endpoint: 'ssh://root@b', gpus: [0, 1, 2], ssh_host: 198.51.100.7, isolate: false}\n"
    )
    a, b = load_hosts(file)
    assert (a.gpus, a.global_gpus, a.remote, a.isolate) == ((3, 5), (0, 1), False, True)
    assert (b.gpus, b.global_gpus, b.remote, b.isolate) == ((0, 1, 2), (2, 3, 4), True, False)


def test_nvidia_smi_output_is_parsed_or_refused() -> None:
    gpus = parse_smi("0, GPU-aaa, NVIDIA H100 80GB HBM3, 81559\n1, GPU-bbb, NVIDIA H100 80GB HBM3, 81559\n")
    assert [(g.index, g.uuid, g.memory_bytes) for g in gpus] == [
        (0, "GPU-aaa", 81559 * 2**20),
        (1, "GPU-bbb", 81559 * 2**20),
    ]
    with pytest.raises(ValueError):
        parse_smi("garbage")


class Checks:
    """The host checker: every host up with H100s unless marked down (the GPU is what is mocked)."""

    def __init__(self) -> None:
        self.down: dict[str, str] = {}

    def __call__(self, config: HostConfig, image: str) -> HostCheck:
        if config.name in self.down:
            return HostCheck(False, self.down[config.name])
        gpus = tuple(
            GpuSpec(index=g, name="NVIDIA H100", memory_bytes=80 * 10**9) for g in config.global_gpus
        )
        return HostCheck(True, "", gpus, cpus=8, ram_bytes=2**34)


def _multi(tmp_path: Path, checks: Checks) -> tuple[AllocationManager, MultiHostBackend]:
    hosts = parse_hosts({"hosts": [_entry("small", [0, 1]), _entry("big", [0, 1, 2, 3])]})
    store = LeaseStore(tmp_path / "leases.db")

    def embedded(config: HostConfig) -> EmbeddedBackend:
        low = BASE + (0 if config.name == "small" else 10)
        return EmbeddedBackend(tmp_path / config.name, bind_host="127.0.0.1", port_range=(low, low + 9))

    def host_of(lease_id: str) -> str | None:
        lease = store.get(lease_id)
        return None if lease is None else lease.record.host

    backend = MultiHostBackend(hosts, host_of, embedded, "img", checker=checks)  # type: ignore[arg-type]
    return AllocationManager(store, backend, [], placement=backend), backend


def _req(gpus: int, host: str | None = None, key=None) -> AllocateRequest:  # noqa: ANN001
    return AllocateRequest(
        requirements=Requirements(gpu_count=gpus, host=host),
        duration_s=600,
        ssh_public_key=(key or new_renter_key()).public_line,
    )


async def test_placement_keeps_a_lease_on_one_host_best_fit_first(tmp_path: Path) -> None:
    checks = Checks()
    manager, backend = _multi(tmp_path, checks)
    try:
        await check_and_recover(backend, manager)
        assert [g.index for g in manager.gpus] == [0, 1, 2, 3, 4, 5]
        first = await manager.allocate(OWNER, _req(2))  # fits "small" exactly: the big host stays whole
        assert (first.host, [g.index for g in first.gpus]) == ("small", [0, 1])
        second = await manager.allocate(OWNER, _req(3))
        assert (second.host, [g.index for g in second.gpus]) == ("big", [2, 3, 4])
        with pytest.raises(RequestFailed) as refused:  # 1 GPU free in all: never split across hosts
            await manager.allocate(OWNER, _req(2))
        assert refused.value.code == ErrorCode.NO_CAPACITY
        with pytest.raises(RequestFailed) as refused:
            await manager.allocate(OWNER, _req(5))
        assert refused.value.code == ErrorCode.UNSUPPORTED and "largest here has 4" in refused.value.reason
        with pytest.raises(RequestFailed) as refused:
            await manager.allocate(OWNER, _req(0, host="nowhere"))
        assert refused.value.code == ErrorCode.NO_CAPACITY and "no host 'nowhere'" in refused.value.reason
    finally:
        await manager.backend.close()  # type: ignore[attr-defined]
        manager.store.close()


async def test_a_down_host_takes_no_lease_and_the_others_keep_serving(tmp_path: Path) -> None:
    checks = Checks()
    manager, backend = _multi(tmp_path, checks)
    key = new_renter_key()
    try:
        await check_and_recover(backend, manager)
        on_big = await manager.allocate(OWNER, _req(1, host="big", key=key))
        checks.down["big"] = "engine unreachable: connection refused"
        assert await check_and_recover(backend, manager) == {"small": True, "big": False}
        assert [g.index for g in manager.free_gpus()] == [0, 1]  # the big host's GPUs are not offered
        specs = {h.name: h for h in backend.host_specs()}
        assert not specs["big"].up and "connection refused" in specs["big"].reason
        with pytest.raises(RequestFailed) as refused:
            await manager.allocate(OWNER, _req(1, host="big"))
        assert refused.value.code == ErrorCode.NO_CAPACITY and "down: big" in refused.value.reason
        with pytest.raises(RequestFailed):  # key exchange on a down host fails fast, lease kept
            await manager.exchange_key(OWNER, on_big.lease_id, new_renter_key().public_line)
        served = await manager.allocate(OWNER, _req(2, key=key))
        assert served.host == "small" and served.ssh is not None
        done = await ssh_run(served.ssh.host, served.ssh.port, served.ssh.host_key, key, "echo ok")
        assert done.stdout == "ok\n"
        del checks.down["big"]
        assert await check_and_recover(backend, manager) == {"small": True, "big": True}
        assert (await manager.status(OWNER, on_big.lease_id)).state == "active"
    finally:
        await manager.backend.close()  # type: ignore[attr-defined]
        manager.store.close()


def test_version_2_store_gains_the_host_column_and_keeps_rows(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    LeaseStore(path).close()
    conn = sqlite3.connect(path)
    conn.executescript(
        "ALTER TABLE leases DROP COLUMN host;"
        "INSERT INTO leases VALUES ('" + "a" * 32 + "','o','rental','[0]',1,1,1,64,0,'k',1.0,9.0,"
        "'active','{}',NULL,NULL,NULL);"
    )
    conn.close()
    store = LeaseStore(path)
    kept = store.get("a" * 32)
    assert kept is not None and kept.state == "active" and kept.record.host is None
    store.close()


async def test_specs_list_every_host_with_its_state(tmp_path: Path) -> None:
    from compute.miner.specs import multihost_specs
    from compute.specs import SpecsCache

    checks = Checks()
    checks.down["big"] = "the lease image 'img' is not on this host; load it there"
    manager, backend = _multi(tmp_path, checks)
    try:
        await check_and_recover(backend, manager)
        specs = multihost_specs(SpecsCache(ttl_s=60).get, backend, manager)()
        hosts = {h.name: h for h in specs.hosts}
        assert hosts["small"].up and hosts["small"].gpus == [0, 1] and hosts["small"].cpu_cores == 8
        assert not hosts["big"].up and "load it there" in hosts["big"].reason
        assert [g.index for g in specs.gpus] == [0, 1, 2, 3, 4, 5]
        assert type(specs).model_validate_json(specs.model_dump_json()) == specs  # it travels
    finally:
        await manager.backend.close()  # type: ignore[attr-defined]
        manager.store.close()
