"""Is a Docker host fit to take leases? Reachable, a runtime for its GPUs, the base image, the GPUs.

:func:`check_host` is one blocking pass over Docker's remote API (no agent on the host): ``ping``,
``info`` (runtimes, CPUs, memory), the lease image, and, when the host offers GPUs, a throw-away
container of that image running ``nvidia-smi`` under the GPU runtime that must list every offered
device index. Its :class:`HostCheck` says up or down with a reason an operator can act on.

Deliberately not here: deciding what to do with a down host (``hosts.backend`` keeps serving the
others) or proving a GPU (validators do, with PoG).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import docker
from docker.errors import DockerException, ImageNotFound
from docker.types import DeviceRequest

from compute.allocation.hosts.config import HostConfig
from compute.allocation.hosts.sshclient import bound_ssh
from compute.protocol import GpuSpec

log = logging.getLogger(__name__)

API_VERSION = "1.41"  # explicit, so building a client never contacts the engine (Docker >= 20.10)
CLIENT_TIMEOUT_S = 60
CHECK_TIMEOUT_S = 10  # per socket read of a check's client
CHECK_DEADLINE_S = 30.0  # one whole check (ping, info, image, nvidia-smi in a container)
_SMI = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class ProbedGpu:
    index: int  # the host's device index
    uuid: str
    name: str
    memory_bytes: int


GpuProbe = Callable[[docker.DockerClient, str], list[ProbedGpu]]


@dataclass(frozen=True)
class HostCheck:
    up: bool
    reason: str = ""
    gpus: tuple[GpuSpec, ...] = ()  # miner-wide indices, as offered
    cpus: int = 0
    ram_bytes: int = 0


def docker_client(config: HostConfig, timeout_s: int = CLIENT_TIMEOUT_S) -> docker.DockerClient:
    """A client for the host's endpoint; TLS verifies the daemon against the host's CA."""
    tls = None
    if config.tls is not None:
        ca, cert, key = config.tls
        tls = docker.tls.TLSConfig(client_cert=(str(cert), str(key)), ca_cert=str(ca), verify=True)
    client = docker.DockerClient(
        base_url=config.endpoint,
        version=API_VERSION,
        timeout=timeout_s,
        tls=tls,
        use_ssh_client=config.endpoint.startswith("ssh://"),
    )
    if tls is not None:
        # requests lets REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE replace the session's CA: the host's own CA must win
        client.api.trust_env = False
    if config.endpoint.startswith("ssh://"):
        bound_ssh(client, config.endpoint, timeout_s)  # connect, banner and keep-alive timeouts
    return client


def nvidia_smi(client: docker.DockerClient, image: str) -> list[ProbedGpu]:
    """The host's GPUs as ``nvidia-smi`` in ``image`` under the GPU runtime sees them."""
    output = client.containers.run(
        image,
        _SMI,
        device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])],
        network_disabled=True,
        remove=True,
        stdout=True,
        stderr=False,
    )
    return parse_smi(output.decode("utf-8", "replace"))


def parse_smi(text: str) -> list[ProbedGpu]:
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[0].isdigit() or not parts[3].isdigit():
            raise ValueError(f"unexpected nvidia-smi line {line!r}")
        gpus.append(ProbedGpu(int(parts[0]), parts[1], parts[2][:128], int(parts[3]) * 1024 * 1024))
    return gpus


def check_host(config: HostConfig, image: str, probe: GpuProbe = nvidia_smi) -> HostCheck:
    """One check of ``config``'s engine; never raises (a failure is a down :class:`HostCheck`)."""
    try:
        client = docker_client(config, CHECK_TIMEOUT_S)
    except DockerException as exc:
        return HostCheck(False, f"cannot build a Docker client: {exc}"[:300])
    try:
        return _check(client, config, image, probe)
    except DockerException as exc:
        return HostCheck(False, f"engine unreachable or failing: {exc}"[:300])
    except OSError as exc:  # TLS files, sockets
        return HostCheck(False, f"cannot reach the engine: {exc}"[:300])
    finally:
        client.close()


def _check(client: docker.DockerClient, config: HostConfig, image: str, probe: GpuProbe) -> HostCheck:
    client.ping()
    info = client.info()
    cpus, ram = int(info.get("NCPU") or 0), int(info.get("MemTotal") or 0)
    try:
        client.images.get(image)
    except ImageNotFound:
        return HostCheck(
            False, f"the lease image {image!r} is not on this host; load it there", (), cpus, ram
        )
    if not config.gpus:
        return HostCheck(True, "", (), cpus, ram)
    if "nvidia" not in (info.get("Runtimes") or {}):
        return HostCheck(
            False, "no nvidia runtime on this host (install nvidia-container-toolkit)", (), cpus, ram
        )
    try:
        found = {g.index: g for g in probe(client, image)}
    except (DockerException, ValueError) as exc:
        return HostCheck(False, f"GPU probe failed: {exc}"[:300], (), cpus, ram)
    missing = sorted(set(config.gpus) - found.keys())
    if missing:
        return HostCheck(
            False, f"offered GPU(s) {missing} not found (host has {sorted(found)})", (), cpus, ram
        )
    return HostCheck(True, "", _offered(config, found), cpus, ram)


def _offered(config: HostConfig, found: dict[int, ProbedGpu]) -> tuple[GpuSpec, ...]:
    return tuple(
        GpuSpec(index=g, name=found[d].name, memory_bytes=found[d].memory_bytes, uuid=found[d].uuid or None)
        for g, d in zip(config.global_gpus, config.gpus, strict=True)
    )


def fake_probe(gpus: Sequence[ProbedGpu]) -> GpuProbe:
    """A probe answering ``gpus`` (tests and the CPU demo: only the GPU is ever mocked)."""
    return lambda client, image: list(gpus)


__all__ = [
    "HostCheck",
    "ProbedGpu",
    "check_host",
    "docker_client",
    "fake_probe",
    "nvidia_smi",
    "parse_smi",
    "CHECK_DEADLINE_S",
]
