"""Docker cluster members joined by the renter's WireGuard overlay, on two real Docker engines.

Miner 0 rents on this machine's engine with its tenant firewall on (``--miner.overlay_cidrs`` names
the second engine's address range); miner 1 on a second dockerd in its own network namespace
(10.203.26.2, reached over TLS), as a miner on another host. ``register.py allocate --nodes 2
--overlay`` rents one lease on each, joins them over their pinned SSH sessions, and ``cluster run``
exchanges bytes over TCP between the ranks through ``MASTER_ADDR:MASTER_PORT`` inside the overlay,
which the tenant firewall would drop on any real address. Then what the exception does not open: an
overlay lease reaches the second engine's Docker API (TCP) no better than before, a tenant lease
sends UDP there no better than before, and a cluster whose members cannot reach each other is
released whole with the pairs named. Last, the interconnect proof (gloo, ``cluster check``) runs
across the two members through the overlay, torch copied into both leases.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import docker
import pytest
from test_cluster import Net, start_net

from compute.allocation import DockerBackend, LeaseStore
from compute.allocation.docker.second_engine import IMAGE, SecondEngine
from compute.allocation.hosts.backend import host_backend
from compute.allocation.hosts.check import docker_client
from compute.allocation.hosts.config import parse_hosts
from compute.operator import EXIT_OK, EXIT_REFUSED, overlay

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NET = SECOND_ENGINE_NET = 26  # its addresses: 10.203.26.0/30 and 10.203.27.0/24 (others use 17, 20, 23)
NS_ADDRESS = f"10.203.{NET}.2"  # the second engine's namespace (scripts/second_dockerd.sh)
NS_RANGE = f"10.203.{NET}.0/30"

# rank 0 listens on its overlay address at MASTER_PORT; rank 1 connects to MASTER_ADDR (retrying
# while rank 0 starts) and both print what crossed
EXCHANGE = r"""
import os, socket, time
rank, addr, port = int(os.environ["RANK"]), os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    server = socket.create_server((os.environ["OVERLAY_ADDR"], port))
    server.settimeout(60)
    conn, peer = server.accept()
    print("rank 0 got", conn.recv(64).decode(), "from", peer[0], flush=True)
    conn.sendall(b"welcome")
else:
    for _ in range(200):
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    conn.sendall(f"hello from {os.environ['OVERLAY_ADDR']}".encode())
    print("rank 1 got", conn.recv(64).decode(), flush=True)
"""


def _two_hosts(
    tmp_path: Path, make_wallet, engine: SecondEngine, cidrs: tuple[str, ...]
) -> tuple[Net, object]:
    """Miner 0 on this engine (isolated, ``cidrs`` open to overlay UDP), miner 1 on the second."""
    tag = uuid.uuid4().hex[:6]

    def local(where: Path, ports: tuple[int, int]) -> DockerBackend:
        return DockerBackend(
            image=IMAGE,
            host="127.0.0.1",
            ssh_port_range=ports,
            name_prefix=f"test-overlay-{tag}-0",
            miner_id=f"test-overlay-{tag}-0",
            overlay_cidrs=cidrs,
        )

    def remote(where: Path, ports: tuple[int, int]) -> DockerBackend:
        (config,) = parse_hosts({"hosts": [engine.hosts_entry("far", f"{ports[0]}-{ports[1]}")]})
        return host_backend(config, f"test-overlay-{tag}-1", IMAGE)

    return start_net(tmp_path, make_wallet, [250.0, 240.0], backends=[local, remote])


def _cleanup(engine: SecondEngine) -> None:
    """Remove the lease containers these tests made on both engines (a failed test's too)."""
    (config,) = parse_hosts({"hosts": [engine.hosts_entry("far", "40000-40001")]})
    for client in (docker.from_env(), docker_client(config)):
        for container in client.containers.list(all=True, filters={"label": "compute.managed=1"}):
            if container.labels.get("compute.miner", "").startswith("test-overlay-"):
                container.remove(force=True)
        client.close()


def _container(lease_id: str) -> docker.models.containers.Container:
    (found,) = [c for c in docker.from_env().containers.list() if c.name.endswith(lease_id)]
    return found


def _udp_reaches(container, port: int) -> bool:  # noqa: ANN001 - a container on this engine
    """Whether a datagram the lease sends to NS_ADDRESS:port arrives in the second engine's namespace."""
    listener = subprocess.Popen(
        ["nsenter", f"--net=/var/run/netns/cmp2nd{NET}", sys.executable, "-c",
         "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('0.0.0.0', int(sys.argv[1])));"
         "s.settimeout(4); print('ready', flush=True)\n"
         "try:\n    print(s.recv(64).decode())\nexcept OSError:\n    print('nothing')", str(port)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
    send = f"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'probe', ('{NS_ADDRESS}', {port}))"
    for _ in range(3):
        container.exec_run(["python3", "-c", send])
    out, _ = listener.communicate(timeout=10)
    return out.strip() == "probe"


def _tcp_open(container, host: str, port: int) -> bool:  # noqa: ANN001
    probe = f"import socket; s=socket.socket(); s.settimeout(2); print(s.connect_ex(('{host}', {port})))"
    return container.exec_run(["python3", "-c", probe]).output.decode().strip() == "0"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_overlay_members_on_two_engines_reach_each_other_and_nothing_else_opens(
    second_engine: SecondEngine, tmp_path: Path, make_wallet
) -> None:
    net, stop = _two_hosts(tmp_path, make_wallet, second_engine, (NS_RANGE,))
    try:
        code, body, err = net.cli("allocate", "--nodes", "2", "--overlay", "--ttl", "30m", "--ram-gb", "0.5")
        assert code == EXIT_OK, (body, err)
        cluster = body["cluster"]
        assert cluster["overlay"] is True and cluster["master_addr"] == "10.77.0.1"
        assert cluster["master_port"] == 29500
        envs = [node["env"] for node in cluster["nodes"]]
        assert [e["OVERLAY_ADDR"] for e in envs] == ["10.77.0.1", "10.77.0.2"]
        assert cluster["nodes"][1]["ssh_host"] == NS_ADDRESS  # rank 1 is the far engine's

        code, out_lines = net.text(
            "cluster", "run", cluster["cluster_id"], "--timeout", "90", "--", "python3", "-c", EXCHANGE
        )
        assert code == EXIT_OK, out_lines
        assert "[rank 0] rank 0 got hello from 10.77.0.2 from 10.77.0.2" in out_lines, out_lines
        assert "[rank 1] rank 1 got welcome" in out_lines, out_lines

        member = _container(cluster["nodes"][0]["lease_id"])
        assert not _tcp_open(member, NS_ADDRESS, 2376), "an overlay lease reached the far engine's Docker API"
        unisolated = docker.from_env().containers.run(IMAGE, ["sleep", "60"], detach=True, remove=True)
        try:  # the probe sees an open path where nothing isolates: the API does answer there
            assert _tcp_open(unisolated, NS_ADDRESS, 2376)
        finally:
            unisolated.remove(force=True)
        assert _udp_reaches(member, _free_port())  # the named range, UDP: open to members

        code, single, err = net.cli(
            "allocate", "--uid", str(net.miners[0][1]), "--ttl", "30m", "--ram-gb", "0.5"
        )
        assert code == EXIT_OK, (single, err)
        tenant = _container(single["lease"]["lease_id"])
        assert not _udp_reaches(tenant, _free_port())  # a tenant lease: the range stays closed

        # a member's lease restarted: its interface went with its container; `cluster join` again
        far_lease = cluster["nodes"][1]["lease_id"]
        assert net.cli("restart", far_lease)[0] == EXIT_OK
        code, out_lines = net.text("cluster", "run", cluster["cluster_id"], "--", "wg show wg0")
        assert code != EXIT_OK and "[rank 1]" in out_lines, out_lines  # rank 1 has no wg0 any more
        code, joined, err = net.cli("cluster", "join", cluster["cluster_id"])
        assert code == EXIT_OK, (joined, err)
        assert joined["cluster"]["master_addr"] == "10.77.0.1"
        code, out_lines = net.text(
            "cluster", "run", cluster["cluster_id"], "--timeout", "90", "--", "python3", "-c", EXCHANGE
        )
        assert code == EXIT_OK and "[rank 1] rank 1 got welcome" in out_lines, out_lines

        code, done, _ = net.cli("deallocate", "--cluster", cluster["cluster_id"])
        assert code == EXIT_OK and len(done["released"]) == 2
    finally:
        stop()
        _cleanup(second_engine)


def test_members_that_cannot_reach_each_other_are_released_whole(
    second_engine: SecondEngine, tmp_path: Path, make_wallet, monkeypatch
) -> None:
    """Miner 0 names no overlay range: its member's datagrams to the far engine are dropped and the
    far member cannot reach a member published on 127.0.0.1: no handshake, both leases released."""
    monkeypatch.setattr(overlay, "JOIN_TIMEOUT_S", 8.0)
    net, stop = _two_hosts(tmp_path, make_wallet, second_engine, ())
    try:
        code, body, err = net.cli("allocate", "--nodes", "2", "--overlay", "--ttl", "30m", "--ram-gb", "0.5")
        assert code == EXIT_REFUSED, body
        assert body["error"]["code"] == "overlay_failed", body
        message = body["error"]["message"]
        assert "released (2 lease(s))" in message and "no handshake with rank(s) [1]" in message, message
        assert net.leaked() == set()
        for _, _, where in net.miners:
            assert not [s for s in LeaseStore(where / "leases.db").live()]
    finally:
        stop()
        _cleanup(second_engine)


def test_the_cluster_allocate_benchmark_runs_over_docker_and_the_overlay(second_engine: SecondEngine) -> None:
    """``bench cluster-allocate --docker-overlay`` makes its own second engine (net 29, apart from
    this module's) and reports the ratio with the overlay's join inside it, and the overlay's stream."""
    done = subprocess.run(
        [sys.executable, "-m", "compute", "bench", "cluster-allocate", "--docker-overlay", "--iterations", "1", "--json"],
        capture_output=True, text=True, timeout=420, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["backend"] == "docker, overlay" and result["nodes"] == 2
    assert result["overlay_mbps"] > 0 and result["ratio"] > 0
    assert result["cluster_median_s"] >= result["cluster_ssh_median_s"] > 0


def test_sigint_while_the_overlay_is_made_releases_every_member(
    second_engine: SecondEngine, tmp_path: Path, make_wallet
) -> None:
    """Ctrl-C at moments spread over ``allocate --nodes 2 --overlay`` (real processes, real SIGINT),
    the join included: whatever was made is released, on both engines, before ``interrupted``."""
    from test_cluster import _release_all
    from test_interrupted_allocate import Driver

    net, stop = _two_hosts(tmp_path, make_wallet, second_engine, (NS_RANGE,))
    driver = Driver(tmp_path / "driver")
    argv = [
        *net.flags(),
        "allocate",
        "--nodes",
        "2",
        "--overlay",
        "--ttl",
        "30m",
        "--ram-gb",
        "0.5",
        "--json",
    ]
    outcomes = {"interrupted": 0, "completed": 0, "released_made": 0}
    try:
        whole = driver.run(argv)
        assert whole["code"] == EXIT_OK, whole
        _release_all(net)
        for delay in [whole["elapsed"] * (0.3 + 0.8 * i / 6) for i in range(7)]:
            done = driver.run(argv, int(signal.SIGINT), delay)
            assert "Traceback" not in done["stderr"] and "TRACEBACK" not in done["stderr"], done
            if done["code"] == EXIT_OK:
                outcomes["completed"] += 1
                _release_all(net)
            else:
                assert done["code"] == 130 and done["stderr"].strip().startswith("interrupted"), done
                outcomes["interrupted"] += 1
                outcomes["released_made"] += "released" in done["stderr"]
            assert net.live() == {hk: set() for hk, _, _ in net.miners}, (delay, done)
            assert net.book().intents(net.operator) == [], (delay, done)
    finally:
        driver.close()
        stop()
        _cleanup(second_engine)
    print("interrupted allocate --nodes 2 --overlay:", outcomes, "whole", whole["elapsed"])
    assert outcomes["interrupted"] >= 3 and outcomes["released_made"] >= 1


# what the interconnect participant imports, copied from this interpreter into each lease (the test
# image has no torch); the lease runs them with its own python3 (the same 3.11 ABI)
PARTICIPANT_PACKAGES = (
    "torch", "torchgen", "numpy", "numpy.libs", "pydantic", "pydantic_core", "annotated_types",
    "typing_extensions.py", "typing_inspection", "sympy", "mpmath", "networkx", "jinja2", "markupsafe",
    "filelock", "fsspec",
)  # fmt: skip
PY_SP = "printf '#!/bin/sh\\nPYTHONPATH=/opt/sp exec python3 \"$@\"\\n' > /usr/local/bin/py-sp; chmod +x /usr/local/bin/py-sp"


def _participant_tar(where: Path) -> Path:
    """This interpreter's torch, numpy, pydantic (and what they import) and this package, as sp/."""
    torch = pytest.importorskip("torch")
    site = Path(torch.__file__).resolve().parents[1]
    repo = Path(__file__).resolve().parents[2]
    out = where / "sp.tar"
    names = [name for name in PARTICIPANT_PACKAGES if (site / name).exists()]
    common = [
        "--exclude=__pycache__",
        "--exclude=torch/include",
        "--exclude=torch/test",
        "--transform=s,^,sp/,",
    ]
    subprocess.run(["tar", "-cf", str(out), *common, "-C", str(site), *names], check=True)
    subprocess.run(["tar", "-rf", str(out), *common, "-C", str(repo), "compute"], check=True)
    return out


def test_the_interconnect_proof_runs_over_the_overlay_between_two_engines(
    second_engine: SecondEngine, tmp_path: Path, make_wallet
) -> None:
    """``cluster check`` (a gloo all-reduce and the proof, the renter judging) across the two Docker
    members, bound to ``wg0`` by the cluster's own variables: it passes, and the proof keeps up with
    a plain all-reduce of the same size on the same overlay."""
    tarball = _participant_tar(tmp_path)
    net, stop = _two_hosts(tmp_path, make_wallet, second_engine, (NS_RANGE,))
    try:
        code, body, err = net.cli(
            "allocate", "--nodes", "2", "--overlay", "--ttl", "30m", "--ram-gb", "4", "--cpu", "2"
        )
        assert code == EXIT_OK, (body, err)
        cluster = body["cluster"]
        (config,) = parse_hosts({"hosts": [second_engine.hosts_entry("far", "40000-40001")]})
        data = tarball.read_bytes()
        for client, node in zip((docker.from_env(), docker_client(config)), cluster["nodes"], strict=True):
            (container,) = [c for c in client.containers.list() if c.name.endswith(node["lease_id"])]
            assert container.put_archive("/opt", data)
            assert container.exec_run(["sh", "-c", PY_SP]).exit_code == 0
            client.close()
        code, checked, err = net.cli(
            "cluster", "check", cluster["cluster_id"], "--python", "py-sp", "--mib", "16", "--timeout", "300"
        )
        assert code == EXIT_OK, (checked, err)
        link = checked
        print(
            "interconnect proof over the overlay:",
            {k: link.get(k) for k in ("bandwidth_gbs", "plain_gbs", "interval_s")},
        )
        assert link["passed"] and link["bandwidth_gbs"] > 0 and link["plain_gbs"] > 0
        assert link["bandwidth_gbs"] >= 0.5 * link["plain_gbs"]  # the same link, measured both ways
    finally:
        tarball.unlink(missing_ok=True)  # 0.7 GB: not left for pytest's kept temp directories
        stop()
        _cleanup(second_engine)
