"""Building blocks ``neurons/miner.py`` wires together: startup checks, backend choice, loops.

- :class:`StartupError`: a refusal to start with a sentence the operator can act on.
- :func:`check_port_free`, :func:`check_registered`, :func:`build_backend` (refuses the
  embedded backend on the mainnet subnet unless forced; checks that Docker answers; scopes the
  Docker backend to this miner's hotkey so that miners sharing an engine never touch each
  other's containers).
- :class:`PeriodicLoop`: a named loop with an interval, a timeout per step, its try/except
  inside each iteration and a stall warning (expiry, endpoint republishing).

What it deliberately does not do: parse flags (``compute.settings``) or serve HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from compute.allocation import BACKENDS, Backend, TemplateCatalog, TemplateError, load_templates
from compute.allocation.embedded.sandbox import SandboxPaths
from compute.allocation.volumes.keeper import VolumeKeeper, VolumeLimits
from compute.allocation.volumes.store import VolumeStore
from compute.chain import Chain, ChainError
from compute.settings import MinerSettings

if TYPE_CHECKING:
    from compute.allocation.hosts.backend import MultiHostBackend
    from compute.allocation.lease.store import LeaseStore

logger = logging.getLogger(__name__)


class StartupError(Exception):
    """The miner cannot start; the message says what to change."""


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise StartupError(
                f"cannot bind the miner API to {host}:{port} ({exc.strerror}); another process uses it "
                "or the address is not local: pick another --axon.port / --axon.ip"
            ) from None


def check_registered(chain: Chain, hotkey: str, settings: MinerSettings) -> None:
    try:
        registered = chain.is_registered(hotkey)
    except ChainError as exc:
        raise StartupError(
            f"cannot reach the chain {settings.common.chain_target!r}: {exc} "
            "(check --subtensor.network / --subtensor.chain_endpoint and your connection)"
        ) from None
    if not registered:
        raise StartupError(
            f"hotkey {hotkey} is not registered on netuid {settings.common.netuid}; register with "
            f"`btcli subnets register --netuid {settings.common.netuid} -w {settings.common.wallet_name} "
            f"-H {settings.common.wallet_hotkey} --wallet-path {settings.common.wallet_path}`"
        )


def build_catalog(settings: MinerSettings) -> TemplateCatalog:
    """The lease templates to offer; on Docker only those whose image the engine holds."""
    try:
        catalog = load_templates(settings.templates, settings.base_image)
    except TemplateError as exc:
        raise StartupError(str(exc)) from None
    if settings.backend == "docker" and settings.hosts_file is None:  # hosts: each host checks its own
        catalog = catalog.present(image_present)
    return catalog


def build_backend(
    settings: MinerSettings,
    gpu_uuids: list[str] | None,
    ssh_host: str,
    miner_id: str | None = None,
    catalog: TemplateCatalog | None = None,
) -> Backend:
    """The configured rental backend, after the checks that make it usable.

    ``miner_id`` (the miner's hotkey ss58; read from the configured wallet when None) labels the
    Docker backend's containers: its reconcile adopts and removes only those.
    """
    low, high = settings.ssh_port_range
    if settings.backend == "embedded":
        if settings.common.is_mainnet and not settings.force_embedded:
            raise StartupError(
                "the embedded backend runs renters' commands as the miner's own user with best-effort "
                f"limits; it is refused on netuid {settings.common.netuid} on finney. Use --miner.backend "
                "docker, or pass --miner.force_embedded if you really mean it"
            )
        return BACKENDS["embedded"](
            settings.data_dir,
            ssh_host=ssh_host,
            bind_host=settings.axon_ip,
            port_range=(low, high),
            sandbox=embedded_sandbox(settings),
            cpu_share=settings.cpu_share,
            pace_gflops=settings.pace_gflops,
        )
    from compute.specs import collect_docker

    docker = collect_docker(timeout_s=5.0)
    if not docker.available:
        raise StartupError(
            f"Docker is not reachable ({docker.error}); start the engine, add this user to the 'docker' "
            "group, or use --miner.backend embedded on a test network"
        )
    image = catalog.resolve(None).image if catalog is not None else settings.base_image
    check_image(image)
    return BACKENDS["docker"](
        image=image,
        templates=catalog,
        host=settings.axon_ip,
        ssh_port_range=(low, high),
        gpu_uuids=gpu_uuids,
        public_host=ssh_host,
        miner_id=miner_id or wallet_hotkey(settings),
        isolate=not settings.no_tenant_isolation,
        overlay_cidrs=settings.overlay_cidrs,
        volume_dir=settings.data_dir / "volumes" if settings.volume_max_gb > 0 else None,
        volume_mode=settings.volume_quota,
        disk_dir=settings.data_dir / "disks",
        require_disk_cap=not settings.disk_cap_advisory,
    )


def build_volumes(settings: MinerSettings, backend: Backend) -> VolumeKeeper | None:
    """The volume policy for a backend that has volumes (Docker, unless --miner.volume_max_gb 0)."""
    driver = getattr(backend, "volumes", None)
    if driver is None:
        return None
    limits = VolumeLimits(
        max_total_gb=settings.volume_max_gb,
        max_per_renter_gb=settings.volume_max_gb_per_renter,
        default_size_gb=min(10.0, settings.volume_max_gb_per_renter),
        retention_s=settings.volume_retention_days * 86400,
    )
    return VolumeKeeper(VolumeStore(settings.data_dir / "leases.db"), driver, limits)


def build_multihost(
    settings: MinerSettings, miner_id: str, store: LeaseStore, catalog: TemplateCatalog | None = None
) -> MultiHostBackend:
    """The backend over the hosts of ``--miner.hosts_file`` (one Docker backend per host).

    Nothing is contacted here: ``check_hosts`` (at start and periodically) finds which are up.
    """
    from compute.allocation.docker.backend import DockerBackend
    from compute.allocation.hosts.backend import MultiHostBackend, host_backend
    from compute.allocation.hosts.config import HostConfig, HostsFileError, load_hosts

    if settings.backend != "docker":
        raise StartupError("--miner.hosts_file needs --miner.backend docker")
    assert settings.hosts_file is not None
    try:
        hosts = load_hosts(settings.hosts_file)
    except HostsFileError as exc:
        raise StartupError(str(exc)) from None
    image = catalog.resolve(None).image if catalog is not None else settings.base_image

    def host_of(lease_id: str) -> str | None:
        lease = store.get(lease_id)
        return None if lease is None else lease.record.host

    def backend_of(config: HostConfig) -> DockerBackend:
        return host_backend(
            config,
            miner_id,
            image,
            catalog,
            settings.axon_ip,
            disk_dir=settings.data_dir / "disks" / config.name,
            require_disk_cap=not settings.disk_cap_advisory,
            overlay_cidrs=settings.overlay_cidrs,
        )

    return MultiHostBackend(hosts, host_of, backend_of, image)


def embedded_sandbox(settings: MinerSettings) -> SandboxPaths | None:
    """The sandbox of embedded leases (None: the local demo without one), checked by a real probe.

    Off a simulated chain the embedded backend serves real renters, whose commands must not read
    the miner's keys: the sandbox is required there, and refused means the miner does not start."""
    from compute.allocation.embedded import sandbox

    common = settings.common
    demo = common.chain_target.startswith("sim:")
    wanted = settings.lease_sandbox == "on" or (settings.lease_sandbox == "auto" and not demo)
    if settings.lease_sandbox == "off" and not demo:
        raise StartupError("--miner.lease_sandbox off is only for the local demo (a sim: chain)")
    if not wanted:
        return None
    if not sandbox.available():
        raise StartupError(
            "the embedded backend serves renters here only with its lease sandbox (the miner's keys "
            "hidden from leases), which needs the miner to run as root on Linux; run it as root, or "
            "use --miner.backend docker"
        )
    paths = SandboxPaths.for_miner(common.wallet_path, settings.data_dir)
    wallet = Path(os.path.expanduser(str(common.wallet_path)))
    secrets = [str(p) for p in sorted(wallet.rglob("*")) if p.is_file()][:64]
    secrets.append(str(settings.data_dir / "leases.db"))
    try:
        readable = sandbox.probe(paths.hide, paths.keep, secrets, str(settings.data_dir / "sandbox-probe"))
    except (OSError, subprocess.SubprocessError) as exc:
        raise StartupError(f"the embedded lease sandbox does not work here: {exc}") from None
    if readable:
        raise StartupError(
            f"the embedded lease sandbox leaves {readable[0]} readable; use --miner.backend docker"
        )
    logger.info("embedded leases sandboxed: own uid each; hidden: %s", ", ".join(paths.hide))
    return paths


def image_present(image: str, timeout_s: float = 10.0) -> bool:
    """Whether the Docker engine holds ``image`` locally (a lease never pulls at rental time)."""
    import docker  # local import: the SDK is heavy and optional for validators

    client = docker.from_env(timeout=max(1, int(round(timeout_s))))
    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False
    finally:
        client.close()


def check_image(image: str) -> None:
    """Refuse to start when the lease image is missing: say how to build it, not fail a rental later."""
    try:
        present = image_present(image)
    except Exception as exc:  # engine error other than not-found: name it
        raise StartupError(f"cannot inspect the lease image {image!r}: {exc}") from None
    if not present:
        raise StartupError(
            f"the lease image {image!r} is not on this Docker engine; build it first: "
            "`docker build -f docker/Dockerfile -t compute-base:cuda .` (GPU hosts), or "
            "`sudo bash scripts/build_base_image.sh` for the CPU test image compute-base:cpu; "
            "or name an existing image with --miner.base_image"
        )


def wallet_hotkey(settings: MinerSettings) -> str:
    """The ss58 address of the configured wallet's hotkey (StartupError when it cannot be loaded)."""
    from compute.transport import WalletError, load_wallet

    common = settings.common
    try:
        wallet = load_wallet(common.wallet_name, common.wallet_hotkey, str(common.wallet_path))
    except WalletError as exc:
        raise StartupError(str(exc)) from None
    return wallet.hotkey.ss58_address


@dataclass
class PeriodicLoop:
    """Run ``step`` every ``interval_s`` until ``stop`` is set; a failing step is logged, not fatal."""

    name: str
    interval_s: float
    step: Callable[[], Awaitable[object]]
    timeout_s: float = 120.0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                await asyncio.wait_for(self.step(), self.timeout_s)
            except asyncio.TimeoutError:
                logger.warning("loop=%s stalled: step took longer than %.0fs", self.name, self.timeout_s)
            except Exception:
                logger.exception("loop=%s step failed", self.name)
            took = time.monotonic() - started
            if took > self.interval_s:
                logger.warning("loop=%s step took %.1fs (interval %.1fs)", self.name, took, self.interval_s)
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, self.interval_s - took))
            except asyncio.TimeoutError:
                pass


__all__ = [
    "PeriodicLoop",
    "StartupError",
    "build_backend",
    "build_volumes",
    "build_catalog",
    "build_multihost",
    "check_port_free",
    "check_registered",
    "wallet_hotkey",
]
