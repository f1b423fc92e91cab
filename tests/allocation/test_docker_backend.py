"""Docker backend: key validation and container parameters (pure), then real containers over real SSH.

The ``docker`` tests need a running engine and the ``compute-base:cpu`` image
(scripts/build_base_image.sh); they skip with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import tarfile
import time
import uuid

import asyncssh
import httpx
import pytest

from compute.allocation.docker.backend import DockerBackend, LeaseContainerNotFound, StartFailed
from compute.allocation.docker.container_files import authorized_keys_archive, lease_archive, sshd_config
from compute.allocation.docker.spec import cpuset_for, shm_mb
from compute.allocation.lease.backend import BackendError
from compute.allocation.lease.records import Endpoint, LeaseRecord
from compute.allocation.lease.sshkeys import InvalidPublicKey, generate_host_key, validate_public_key

IMAGE = "compute-base:cpu"


def client_key(kind: str = "ssh-ed25519", **kwargs) -> asyncssh.SSHKey:
    return asyncssh.generate_private_key(kind, **kwargs)


def public_line(key: asyncssh.SSHKey) -> str:
    return key.export_public_key("openssh").decode().strip()


def make_lease(public_key: str, **overrides) -> LeaseRecord:
    now = time.time()
    fields = dict(
        lease_id=f"l{uuid.uuid4().hex[:12]}",
        owner_hotkey="5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY",
        purpose="rental",
        gpus=(),
        cpu_count=1,
        memory_mb=256,
        disk_gb=5,
        shm_mb=0,
        extra_ports=0,
        ssh_public_key=public_key,
        created_at=now,
        expires_at=now + 3600,
    )
    fields.update(overrides)
    return LeaseRecord(**fields)


# -- public key validation (pure) --------------------------------------------------------

ED25519 = public_line(client_key())


@pytest.mark.parametrize(
    "bad",
    [
        "ssh-ed25519 AAAA; rm -rf /",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5$(reboot)",
        ED25519 + "\nssh-ed25519 " + ED25519.split()[1],
        ED25519 + '\rcommand="sh"',
        'command="/bin/sh" ' + ED25519,
        ED25519 + " comment with `backticks`\x00",
        "ssh-ed25519 " + "A" * 9000,
        "ssh-dss AAAAB3NzaC1kc3MAAACBAOxyz0123456789",
        "ssh-rsa " + ED25519.split()[1],  # body says ed25519
        "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00" * 3).decode(),
        "",
        "ssh-ed25519",
    ],
)
def test_malicious_or_malformed_public_keys_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidPublicKey):
        validate_public_key(bad)


def test_weak_rsa_key_is_rejected_and_strong_keys_are_normalised() -> None:
    with pytest.raises(InvalidPublicKey, match="1024 bits"):
        validate_public_key(public_line(client_key("ssh-rsa", key_size=1024)))
    for key in (client_key(), client_key("ssh-rsa", key_size=2048), client_key("ecdsa-sha2-nistp256")):
        kind, body = public_line(key).split()[:2]
        assert validate_public_key(f"  {kind} {body} renter@laptop \n") == f"{kind} {body}"


def test_generated_host_key_is_fresh_ed25519_and_matches_its_private_half() -> None:
    first, second = generate_host_key(), generate_host_key()
    assert first.public_line.startswith("ssh-ed25519 ") and first.public_line != second.public_line
    private = asyncssh.import_private_key(first.private_openssh)
    assert public_line(private).split()[:2] == first.public_line.split()


# -- container parameters and files (pure) -----------------------------------------------


def test_container_gets_every_limit_and_no_caller_string_in_its_command() -> None:
    backend = DockerBackend(docker_client=object(), name_prefix="t")  # never touched here
    lease = make_lease(
        ED25519, cpu_count=3, memory_mb=8192, extra_ports=2, ssh_public_key="ssh-ed25519 x; id"
    )
    kwargs = backend.container_kwargs(lease, [40001, 40002, 40003], "ssh-ed25519 HOSTKEY")
    assert kwargs["nano_cpus"] == 3_000_000_000
    assert len(kwargs["cpuset_cpus"].split(",")) == min(3, len(os.sched_getaffinity(0)))
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == "8192m"
    assert kwargs["shm_size"] == "1024m"  # 1/8 of memory, not 90% of the host
    assert kwargs["pids_limit"] == 4096
    assert kwargs["ports"] == {
        "22/tcp": ("127.0.0.1", 40001),
        "8000/tcp": ("127.0.0.1", 40002),
        "8001/tcp": ("127.0.0.1", 40003),
    }
    assert kwargs["name"] == f"t-{lease.lease_id}"
    assert (
        kwargs["labels"]["compute.managed"] == "1" and kwargs["labels"]["compute.lease_id"] == lease.lease_id
    )
    assert kwargs["command"] == ["/bin/sh", "-c", "mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e"]
    assert "privileged" not in kwargs and "no-new-privileges:true" in kwargs["security_opt"]
    assert "device_requests" not in kwargs and kwargs["environment"] == {"NVIDIA_VISIBLE_DEVICES": "void"}
    assert kwargs["storage_opt"] == {"size": "5G"}


def test_gpu_lease_requests_exactly_its_gpus_by_uuid() -> None:
    backend = DockerBackend(docker_client=object(), gpu_uuids=["GPU-aaa", "GPU-bbb", "GPU-ccc"])
    kwargs = backend.container_kwargs(make_lease(ED25519, gpus=(0, 2)), [40001], "ssh-ed25519 K")
    (request,) = kwargs["device_requests"]
    assert request["DeviceIDs"] == ["GPU-aaa", "GPU-ccc"] and request["Capabilities"] == [["gpu"]]
    assert kwargs["environment"] == {"NVIDIA_VISIBLE_DEVICES": "GPU-aaa,GPU-ccc"}


@pytest.mark.parametrize(
    ("asked", "memory", "expected"), [(0, 256, 64), (0, 8192, 1024), (512, 8192, 512), (9000, 4096, 4096)]
)
def test_shared_memory_defaults_small_and_never_exceeds_lease_memory(
    asked: int, memory: int, expected: int
) -> None:
    assert shm_mb(make_lease(ED25519, shm_mb=asked, memory_mb=memory)) == expected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"lease_id": "../../etc"}, "safe container name"),
        ({"lease_id": "a b"}, "safe container name"),
        ({"memory_mb": 0}, "positive"),
        ({"cpu_count": 0}, "positive"),
        ({"gpus": (3,)}, "GPU index 3"),
        ({"extra_ports": 1000}, "extra_ports"),
    ],
)
async def test_unsafe_lease_is_refused_before_docker_is_touched(overrides: dict, message: str) -> None:
    backend = DockerBackend(docker_client=object(), gpu_uuids=["GPU-aaa"])  # any Docker call would fail
    with pytest.raises(BackendError, match=message):
        await backend.start(make_lease(ED25519, **overrides))


async def test_injection_key_is_refused_before_docker_is_touched() -> None:
    backend = DockerBackend(docker_client=object())
    with pytest.raises(InvalidPublicKey):
        await backend.start(make_lease("ssh-ed25519 AAAA; rm -rf /"))
    with pytest.raises(InvalidPublicKey):
        await backend.set_authorized_key("any", "ssh-ed25519 AAAA\nrm -rf /")


def test_sshd_config_is_key_only() -> None:
    config = sshd_config().splitlines()
    for line in (
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "AllowTcpForwarding no",
        "HostKey /etc/ssh/ssh_host_ed25519_key",
    ):
        assert line in config
    assert sum(line.startswith("HostKey") for line in config) == 1


def test_archives_hold_secrets_with_private_modes() -> None:
    host = generate_host_key()
    with tarfile.open(
        fileobj=io.BytesIO(lease_archive(host.private_openssh, host.public_line, ED25519, "x"))
    ) as tar:
        modes = {member.name: (member.mode, member.uid) for member in tar.getmembers()}
        assert tar.extractfile("root/.ssh/authorized_keys").read() == (ED25519 + "\n").encode()
    assert modes == {
        "etc/ssh/ssh_host_ed25519_key": (0o600, 0),
        "etc/ssh/ssh_host_ed25519_key.pub": (0o644, 0),
        "etc/ssh/sshd_config": (0o644, 0),
        "root/.ssh": (0o700, 0),
        "root/.ssh/authorized_keys": (0o600, 0),
    }
    with tarfile.open(fileobj=io.BytesIO(authorized_keys_archive(ED25519, "authorized_keys.new"))) as tar:
        assert [(m.name, m.mode) for m in tar.getmembers()] == [("authorized_keys.new", 0o600)]


# -- real containers ---------------------------------------------------------------------


def _docker_skip_reason() -> str | None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:  # any failure means "no usable engine here"
        return f"Docker engine not reachable: {exc}"
    try:
        client.images.get(IMAGE)
    except Exception:
        return f"image {IMAGE} missing: run scripts/build_base_image.sh"
    return None


@pytest.fixture(scope="module")
def docker_ready() -> None:
    reason = _docker_skip_reason()
    if reason and os.environ.get("COMPUTE_REQUIRE_DOCKER") == "1":
        pytest.fail(f"COMPUTE_REQUIRE_DOCKER=1 but {reason}")
    if reason:
        pytest.skip(reason)


@pytest.fixture
async def backend(docker_ready: None):
    prefix = f"test-lease-{uuid.uuid4().hex[:6]}"
    backend = DockerBackend(image=IMAGE, name_prefix=prefix)
    yield backend
    client = backend._client()
    for container in client.containers.list(all=True, filters={"name": prefix}):
        container.remove(force=True)
    await backend.release_network()  # the lease network and its firewall rules go with the last lease


def _pinned(endpoint: Endpoint) -> tuple[list[asyncssh.SSHKey], list, list]:
    return ([asyncssh.import_public_key(endpoint.host_key)], [], [])


async def ssh_run(endpoint: Endpoint, key: asyncssh.SSHKey, command: str) -> str:
    async with asyncssh.connect(
        endpoint.host,
        endpoint.ssh_port,
        username=endpoint.username,
        client_keys=[key],
        known_hosts=_pinned(endpoint),
        connect_timeout=10,
    ) as conn:
        result = await conn.run(command, check=True, timeout=10)
        return str(result.stdout)


CGROUP_PROBE = (
    "nproc; "
    "if [ -f /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max; "
    "else echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); fi; "
    "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
    "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max; "
    "df -m /dev/shm | tail -1; "
    "cat /sys/fs/cgroup/memory.swap.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
)


@pytest.mark.docker
async def test_renter_reaches_lease_with_pinned_host_key_and_limits_apply(backend: DockerBackend) -> None:
    key = client_key()
    lease = make_lease(public_line(key), cpu_count=1, memory_mb=256)
    endpoint = await backend.start(lease)
    assert (endpoint.host, endpoint.username) == ("127.0.0.1", "root")
    assert 40000 <= endpoint.ssh_port <= 40999 and endpoint.host_key.startswith("ssh-ed25519 ")
    lines = (await ssh_run(endpoint, key, CGROUP_PROBE)).splitlines()
    assert lines[0] == "1"  # nproc: the lease is pinned to as many cores as it rented
    quota, period = (int(x) for x in lines[1].split())
    assert quota / period == 1.0  # and the CFS quota caps what it uses
    assert int(lines[2]) == 256 * 1024 * 1024
    assert lines[3] == "4096"
    assert lines[4].split()[1] == "64"  # /dev/shm MiB: 1/8 of 256 MiB, floor 64
    assert lines[5] in ("0", str(256 * 1024 * 1024))  # no swap beyond memory (cgroup v2 / v1)
    assert await backend.running() == {lease.lease_id}
    labels = backend._client().containers.get(f"{backend.name_prefix}-{lease.lease_id}").labels
    expected_disk = "enforced" if backend.disk_limit_enforced else "advisory"
    assert (labels["compute.owner"], labels["compute.disk_limit"]) == (lease.owner_hotkey, expected_disk)


@pytest.mark.docker
async def test_wrong_pinned_host_key_and_passwords_are_refused(backend: DockerBackend) -> None:
    key = client_key()
    endpoint = await backend.start(make_lease(public_line(key)))
    impostor = Endpoint(endpoint.host, endpoint.ssh_port, "root", generate_host_key().public_line, {})
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        await ssh_run(impostor, key, "true")
    with pytest.raises(asyncssh.PermissionDenied):
        await asyncssh.connect(
            endpoint.host,
            endpoint.ssh_port,
            username="root",
            password="root",
            client_keys=None,
            agent_path=None,
            known_hosts=_pinned(endpoint),
            connect_timeout=10,
        )


@pytest.mark.docker
async def test_key_exchange_locks_out_old_key_and_restart_keeps_host_key(backend: DockerBackend) -> None:
    old, new = client_key(), client_key()
    lease = make_lease(public_line(old))
    endpoint = await backend.start(lease)
    assert (await ssh_run(endpoint, old, "echo ok")).strip() == "ok"
    await backend.set_authorized_key(lease.lease_id, public_line(new))
    with pytest.raises(asyncssh.PermissionDenied):
        await ssh_run(endpoint, old, "true")
    assert (await ssh_run(endpoint, new, "stat -c %a /root/.ssh/authorized_keys")).strip() == "600"
    await backend.restart(lease.lease_id)
    again = await backend.endpoint(lease.lease_id)
    assert again == endpoint  # same port, same host key after restart
    assert (await ssh_run(endpoint, new, "echo back")).strip() == "back"
    with pytest.raises(asyncssh.PermissionDenied):
        await ssh_run(endpoint, old, "true")


@pytest.mark.docker
async def test_key_exchange_ends_the_old_keys_open_sessions(backend: DockerBackend) -> None:
    old, new = client_key(), client_key()
    lease = make_lease(public_line(old))
    endpoint = await backend.start(lease)
    async with asyncssh.connect(
        endpoint.host,
        endpoint.ssh_port,
        username=endpoint.username,
        client_keys=[old],
        known_hosts=_pinned(endpoint),
        connect_timeout=10,
    ) as conn:
        process = await conn.create_process("sleep 300")
        assert (await conn.run("echo alive", check=True, timeout=10)).stdout.strip() == "alive"
        await backend.set_authorized_key(lease.lease_id, public_line(new))
        await asyncio.wait_for(conn.wait_closed(), 10)  # the session is gone, not merely locked out
        process.close()
    assert (await ssh_run(endpoint, new, "echo ok")).strip() == "ok"  # the listener still serves
    assert (await ssh_run(endpoint, new, "pgrep -c -x sleep || true")).strip() == "0"


@pytest.mark.docker
async def test_stop_removes_container_idempotently_and_running_reflects_it(backend: DockerBackend) -> None:
    key = client_key()
    first, second = make_lease(public_line(key)), make_lease(public_line(key))
    await asyncio.gather(backend.start(first), backend.start(second))
    assert await backend.running() == {first.lease_id, second.lease_id}
    await backend.stop(first.lease_id)
    await backend.stop(first.lease_id)  # idempotent
    assert await backend.running() == {second.lease_id}
    with pytest.raises(LeaseContainerNotFound):
        await backend.restart(first.lease_id)
    with pytest.raises(LeaseContainerNotFound):
        await backend.set_authorized_key(first.lease_id, public_line(key))
    with pytest.raises(StartFailed, match="already exists"):
        await backend.start(second)


@pytest.mark.docker
async def test_extra_ports_reach_a_service_inside_the_lease(backend: DockerBackend) -> None:
    key = client_key()
    endpoint = await backend.start(make_lease(public_line(key), extra_ports=2))
    assert sorted(endpoint.ports) == [8000, 8001]
    await ssh_run(endpoint, key, "(cd /etc; setsid python3 -m http.server 8001 </dev/null >/dev/null 2>&1 &)")
    url = f"http://127.0.0.1:{endpoint.ports[8001]}/hostname"
    deadline = time.monotonic() + 10
    async with httpx.AsyncClient() as http:
        while True:
            try:
                response = await http.get(url)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    assert response.status_code == 200 and response.text.startswith("lease-")


@pytest.mark.docker
async def test_start_that_never_gets_ready_leaves_no_container(backend: DockerBackend) -> None:
    backend.ready_timeout_s = 0.0
    lease = make_lease(ED25519)
    with pytest.raises(StartFailed, match="did not answer"):
        await backend.start(lease)
    assert await backend.running() == set()
    with pytest.raises(LeaseContainerNotFound):
        await backend.endpoint(lease.lease_id)


@pytest.mark.parametrize(
    ("cpu_count", "host", "cores"),
    [
        (1, (0, 1), 1),
        (2, (0, 1, 2, 3), 2),
        (4, (0, 1, 2, 3), 4),
        (8, (0, 1), 2),  # never more cores than the host has
        (0, (0, 1), 1),
    ],
)
def test_cpuset_pins_the_rented_core_count_from_the_host_pool(cpu_count, host, cores) -> None:
    chosen = [int(c) for c in cpuset_for("a" * 32, cpu_count, host).split(",")]
    assert len(chosen) == cores == len(set(chosen))
    assert set(chosen) <= set(host) and chosen == sorted(chosen)


def test_cpuset_spreads_leases_and_is_empty_without_an_affinity_pool() -> None:
    starts = {cpuset_for(f"{i:032x}", 1, range(8)) for i in range(64)}
    assert len(starts) >= 6  # 64 leases over 8 cores land on (nearly) all of them
    assert cpuset_for("a" * 32, 2, ()) == ""
