"""Tenants on real containers: no path to another tenant, the host (gateway, miner API) or private ranges."""

from __future__ import annotations

import asyncio
import subprocess
import uuid

import pytest
from test_docker_backend import IMAGE, client_key, docker_ready, make_lease, public_line, ssh_run  # noqa: F401

from compute.allocation.docker.backend import DockerBackend
from compute.allocation.docker.netpolicy import BLOCKED_DESTINATIONS, Firewall, NetworkPolicy

PROBE = (
    "import socket,sys\n"
    "s=socket.socket(); s.settimeout(2)\n"
    "print('open' if s.connect_ex((sys.argv[1], int(sys.argv[2])))==0 else 'closed')"
)


def test_policy_drops_private_link_local_and_metadata_and_allows_replies():
    rules = NetworkPolicy("5Fminer").chain_rules()
    forward = rules[NetworkPolicy("5Fminer").forward_chain]
    assert forward[0][-1] == "ACCEPT" and "ESTABLISHED,RELATED" in forward[0]
    dropped = {rule[1] for rule in forward if rule[-1] == "DROP"}
    assert {"169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8"} <= dropped
    assert dropped == set(BLOCKED_DESTINATIONS)
    assert rules[NetworkPolicy("5Fminer").input_chain][-1] == ["-j", "DROP"]
    assert len(NetworkPolicy("x" * 48).bridge) <= 15


def test_missing_iptables_refuses_instead_of_running_unisolated():
    def failing(argv):  # noqa: ANN001
        raise FileNotFoundError("iptables")

    with pytest.raises(Exception, match="cannot run iptables"):
        Firewall(NetworkPolicy("m"), runner=failing).ensure()


def _probe(container, ip: str, port: int) -> str:  # noqa: ANN001
    result = container.exec_run(["python3", "-c", PROBE, ip, str(port)])
    return result.output.decode().strip()


@pytest.fixture
async def world(docker_ready):  # noqa: F811
    tag = uuid.uuid4().hex[:6]
    backend = DockerBackend(image=IMAGE, name_prefix=f"test-iso-{tag}")
    client = backend._client()
    victim_net = client.networks.create(f"test-victim-{tag}", driver="bridge")
    victim = client.containers.run(
        IMAGE,
        ["python3", "-m", "http.server", "8080"],
        name=f"test-victim-{tag}",
        detach=True,
        network=victim_net.name,
        labels={"test": tag},
    )
    yield backend, victim, victim_net
    victim.remove(force=True)
    for container in client.containers.list(all=True, filters={"name": f"test-iso-{tag}"}):
        container.remove(force=True)
    await backend.release_network()
    victim_net.remove()


@pytest.mark.docker
async def test_tenant_reaches_nothing_private_and_renters_still_reach_it(world):
    backend, victim, victim_net = world
    key = client_key()
    a, b = make_lease(public_line(key)), make_lease(public_line(key))
    endpoint_a, _ = await asyncio.gather(backend.start(a), backend.start(b))
    client = backend._client()
    net = client.networks.get(backend.lease_network.name)
    gateway = net.attrs["IPAM"]["Config"][0]["Gateway"]
    ip = {c.name: c.attrs["NetworkSettings"]["Networks"][net.name]["IPAddress"] for c in net.containers}
    container_a = client.containers.get(backend._container_name(a.lease_id))
    ip_b = ip[backend._container_name(b.lease_id)]
    victim.reload()
    victim_ip = victim.attrs["NetworkSettings"]["Networks"][victim_net.name]["IPAddress"]

    host = await asyncio.start_server(lambda r, w: w.close(), gateway, 0)  # the miner's API on the host
    api_port = host.sockets[0].getsockname()[1]
    try:
        paths = {
            "other tenant ssh": await asyncio.to_thread(_probe, container_a, ip_b, 22),
            "host gateway api": await asyncio.to_thread(_probe, container_a, gateway, api_port),
            "private range": await asyncio.to_thread(_probe, container_a, victim_ip, 8080),
        }
        # the probe can see an open path: the victim's own network has no isolation
        control = await asyncio.to_thread(_probe, victim, victim_ip, 8080)
    finally:
        host.close()
    assert paths == {k: "closed" for k in paths}, paths
    assert control == "open"
    assert await ssh_run(endpoint_a, key, "echo renter in") == "renter in\n"  # replies still flow

    await backend.stop(a.lease_id)
    assert backend.lease_network.firewall.installed()  # b still runs: rules stay
    await backend.stop(b.lease_id)
    assert not backend.lease_network.firewall.installed()
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
    assert backend.lease_network.policy.tag not in rules
    assert not client.networks.list(names=[backend.lease_network.name])
