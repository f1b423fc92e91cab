"""Probe tenant isolation on real containers: can a lease open a connection where it must not?

Starts two leases on a Docker backend with isolation on, a listener on the host side of the lease
network (standing in for the miner's API) and a victim container on a separate network this
function creates, and probes from the first lease. Everything it touches it creates and removes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncssh

from compute.allocation.docker.backend import DockerBackend
from compute.allocation.lease.records import LeaseRecord

PROBE = (
    "import socket,sys\n"
    "s=socket.socket(); s.settimeout(2)\n"
    "print('open' if s.connect_ex((sys.argv[1], int(sys.argv[2])))==0 else 'closed')"
)


def _lease(public_key: str) -> LeaseRecord:
    now = time.time()
    return LeaseRecord(
        f"p{uuid.uuid4().hex[:12]}",
        "5" + "P" * 47,
        "rental",
        (),
        1,
        256,
        1,
        64,
        0,
        public_key,
        now,
        now + 600,
    )


def _probe(container: Any, ip: str, port: int) -> str:
    return container.exec_run(["python3", "-c", PROBE, ip, str(port)]).output.decode().strip()


def _ip(container: Any, network: str) -> str:
    container.reload()
    return str(container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"])


async def probe_paths(image: str = "compute-base:cpu") -> dict[str, str]:
    """``{path: "open" | "closed"}`` for another tenant, the host gateway and a private address."""
    tag = uuid.uuid4().hex[:6]
    backend = DockerBackend(image=image, name_prefix=f"probe-{tag}", miner_id=f"probe-{tag}")
    client = backend._client()
    key = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()
    victim_net = client.networks.create(f"probe-victim-{tag}", driver="bridge")
    victim = client.containers.run(
        image,
        ["python3", "-m", "http.server", "8080"],
        name=f"probe-victim-{tag}",
        detach=True,
        network=victim_net.name,
    )
    a, b = _lease(key), _lease(key)
    try:
        await asyncio.gather(backend.start(a), backend.start(b))
        assert backend.lease_network is not None
        net = client.networks.get(backend.lease_network.name)
        gateway = net.attrs["IPAM"]["Config"][0]["Gateway"]
        first = client.containers.get(backend._container_name(a.lease_id))
        second = client.containers.get(backend._container_name(b.lease_id))
        host = await asyncio.start_server(lambda r, w: w.close(), gateway, 0)
        try:
            port = host.sockets[0].getsockname()[1]
            return {
                "tenant->tenant ssh": await asyncio.to_thread(_probe, first, _ip(second, net.name), 22),
                "tenant->host gateway (miner api)": await asyncio.to_thread(_probe, first, gateway, port),
                "tenant->private address": await asyncio.to_thread(
                    _probe, first, _ip(victim, victim_net.name), 8080
                ),
            }
        finally:
            host.close()
    finally:
        for lease in (a, b):
            await backend.stop(lease.lease_id)
        victim.remove(force=True)
        victim_net.remove()


__all__ = ["probe_paths"]
