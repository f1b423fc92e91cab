"""Docker rental backend: one resource-limited container per lease, reached by key-only SSH.

Each lease gets a container named ``{prefix}-{lease_id}``, labelled ``compute.*`` and
``compute.miner=<miner_id>`` (the miner's hotkey) so that ``running()`` (and the manager's
reconcile) finds this miner's containers after a restart and never another miner's on the same
engine; the container spec and labels live in :mod:`compute.allocation.docker.spec`. Before the
container starts, a fresh miner-generated ed25519 host key, a fixed sshd_config and the
renter's validated public key are copied in with ``put_archive``; the container command is a
fixed string that starts sshd. CPU, memory (swap = memory), shared memory, pids and the lease's
GPUs are enforced by Docker; the disk size by the kernel (:mod:`compute.allocation.docker.diskcap`:
the storage driver's quota, or a loop-mounted filesystem of the lease's size as the container's
layer), or, where neither works, refused unless advisory sizes were accepted (then the disk watch
stops a lease over its size). ``start`` returns only when sshd answers with its banner on the
published port.

It deliberately does not decide who may rent what (the manager does), keep lease state (the
store does) or talk to the chain. All Docker SDK calls are blocking and run in this engine's own
threads, each under a deadline (``EngineCalls``): a missed deadline is ``DockerUnavailable``, so a
slow or silent engine never takes threads that anything else needs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import docker
from docker.errors import APIError, DockerException, NotFound

from compute.allocation.docker import activity, spec
from compute.allocation.docker.container_files import (
    SSH_DIR,
    USERNAME,
    SshdOptions,
    authorized_keys_archive,
    lease_archive,
    sshd_config,
)
from compute.allocation.docker.diskcap import DiskCap, LeaseDisks, disk_cap_of, layer_dir, without_quota
from compute.allocation.docker.netpolicy import LeaseNetwork
from compute.allocation.docker.spec import EXTRA_PORT_BASE
from compute.allocation.docker.templates import TemplateCatalog
from compute.allocation.lease.activity import Activity
from compute.allocation.lease.backend import BackendError
from compute.allocation.lease.engine import EngineCalls, EngineDeadline
from compute.allocation.lease.ports import pick_free_ports, ssh_banner
from compute.allocation.lease.records import Endpoint, LeaseRecord
from compute.allocation.lease.sshkeys import generate_host_key, validate_public_key
from compute.allocation.volumes.driver import DockerVolumes, VolumeMode
from compute.allocation.volumes.images import ImageError

log = logging.getLogger(__name__)

CALL_DEADLINE_S = 60.0  # one Docker API call (a remote host's own deadline is in its hosts entry)
START_DEADLINE_S = 120.0  # create, copy the files in and start one lease container (up to 3 tries)
DISK_DEADLINE_S = 300.0  # measure every lease container's own layer (Docker walks each one)
T = TypeVar("T")

_LEASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_LIVE_STATUSES = ["running", "restarting", "paused"]


class DockerUnavailable(BackendError):
    """The Docker engine cannot be reached."""


class LeaseContainerNotFound(BackendError):
    """No container exists for the lease."""


class StartFailed(BackendError):
    """A lease container could not be created, started, or did not become reachable."""


class NoFreePort(StartFailed):
    """The configured host port range has no free port left."""


class DiskCapUnavailable(StartFailed):
    """The lease's disk size cannot be held here, and advisory sizes were not accepted."""


class DockerBackend:
    """Rental backend that runs each lease in its own Docker container (``BACKENDS["docker"]``)."""

    name = "docker"
    overlay = True  # cluster members get a TUN device, NET_ADMIN and a UDP port (docs/cluster.md)

    def __init__(
        self,
        image: str = "compute-base:cpu",
        host: str = "127.0.0.1",
        ssh_port_range: tuple[int, int] = (40000, 40999),
        gpu_uuids: list[str] | None = None,
        network: str | None = None,
        docker_client: docker.DockerClient | None = None,
        name_prefix: str = "compute-lease",
        *,
        public_host: str | None = None,
        pids_limit: int = 4096,
        sshd: SshdOptions | None = None,
        ready_timeout_s: float = 20.0,
        miner_id: str | None = None,
        templates: TemplateCatalog | None = None,
        isolate: bool = True,
        volume_dir: Path | None = None,
        volume_mode: VolumeMode = "auto",
        probe_host: str | None = None,
        host_cpus: tuple[int, ...] | None = None,
        local_engine: bool = True,
        calls: EngineCalls | None = None,
        disk_dir: Path | None = None,
        require_disk_cap: bool = False,
        overlay_cidrs: tuple[str, ...] = (),
    ) -> None:
        """``miner_id`` (the miner's hotkey; default ``name_prefix``) labels and scopes the containers.

        ``templates`` maps a lease's requested template to its image (``image`` when None).
        ``isolate`` (unless ``network`` names one) puts leases on the miner's own ICC-off bridge
        with firewall rules (:mod:`compute.allocation.docker.netpolicy`); a lease is refused when they
        cannot be installed. ``volume_dir`` (the miner's data dir) enables persistent volumes
        (:mod:`compute.allocation.volumes.driver`; ``volume_mode`` picks how their size is held).
        cannot be installed. For an engine on another host (``local_engine=False``, see
        :mod:`compute.allocation.hosts.backend`), ``probe_host`` is where sshd readiness is probed,
        ``host_cpus`` the cores to pin leases to (None: this process's affinity) and no LXCFS
        path of this machine is mounted. ``calls``: this engine's threads and per-call deadline
        (:mod:`compute.allocation.lease.engine`; default: its own, 60 s a call). ``disk_dir``: where a
        local engine's lease disks live (:mod:`compute.allocation.docker.diskcap`; None: only the
        storage driver's quota); ``require_disk_cap``: refuse a lease whose disk size neither holds
        (the miner's default; off with ``--miner.disk_cap_advisory``). ``overlay_cidrs``: private
        ranges an isolated miner's cluster members may send UDP to (their peers' overlay ports on a
        private network, ``--miner.overlay_cidrs``); they run on a bridge of their own.
        """
        low, high = ssh_port_range
        if not (1 <= low <= high <= 65535):
            raise ValueError(f"bad ssh_port_range {ssh_port_range}")
        self.image = image
        self.templates = templates
        self.host = host
        self.public_host = public_host or host
        self.port_range = (low, high)
        self.gpu_uuids = list(gpu_uuids) if gpu_uuids is not None else None
        self.network = network
        self.name_prefix = name_prefix
        self.miner_id = spec.validate_miner_id(miner_id if miner_id is not None else name_prefix)
        self.pids_limit = pids_limit
        self.sshd = sshd or SshdOptions()
        self.ready_timeout_s = ready_timeout_s
        self._client_obj = docker_client
        self.calls = calls or EngineCalls(f"{name_prefix}-local", deadline_s=CALL_DEADLINE_S)
        self._client_lock = threading.Lock()
        self._start_lock = asyncio.Lock()
        self._disk_cap: DiskCap | None = None  # None: not probed yet
        self.disks = LeaseDisks(disk_dir) if disk_dir is not None and local_engine else None
        self.require_disk_cap = require_disk_cap
        self.lease_network = LeaseNetwork(self._client, self.miner_id) if isolate and not network else None
        self.overlay_network = (
            LeaseNetwork(self._client, self.miner_id, overlay_cidrs=tuple(overlay_cidrs))
            if self.lease_network is not None
            else None
        )
        self._legacy_warned = False
        self.volumes = (
            DockerVolumes(self._client, self.miner_id, Path(volume_dir), volume_mode, helper_image=image)
            if volume_dir is not None
            else None
        )
        self.probe_host = probe_host
        self.host_cpus = host_cpus
        self.local_engine = local_engine

    # -- public API (Backend protocol) ---------------------------------------------------

    async def start(self, lease: LeaseRecord) -> Endpoint:
        authorized_key = validate_public_key(lease.ssh_public_key)
        self._check_lease(lease)
        if lease.volume is not None:
            if self.volumes is None:
                raise StartFailed(f"lease {lease.lease_id}: this backend has no persistent volumes")
            await self.volumes.prepare(lease.owner_hotkey, lease.volume)  # e.g. mount it after a reboot
        if await self._resumed(lease.lease_id):
            return await self.endpoint(lease.lease_id)
        host_key = generate_host_key()
        archive = lease_archive(
            host_key.private_openssh, host_key.public_line, authorized_key, sshd_config(self.sshd)
        )
        async with self._start_lock:
            network = self.overlay_network if lease.overlay else self.lease_network
            if network is not None:
                await self._call(network.ensure)
            container_id, ports, udp_ports = await self._call(
                self._create_and_start, lease, archive, host_key.public_line, deadline_s=START_DEADLINE_S
            )
        try:
            await self._wait_ready(container_id, ports[22])
        except BackendError:
            await self.stop(lease.lease_id)
            raise
        log.info("lease=%s container started ssh_port=%d ports=%s", lease.lease_id, ports[22], ports)
        extra = {cport: hport for cport, hport in ports.items() if cport != 22}
        return Endpoint(self.public_host, ports[22], USERNAME, host_key.public_line, extra, udp_ports)

    async def _resumed(self, lease_id: str) -> bool:
        """Start the lease's stopped container again (same files, host key and ports) if it has one.

        A container that exited (``docker stop``, a crash) keeps its name, so a fresh create would
        fail with "already exists" forever; one that cannot be resumed is removed and recreated.
        """
        try:
            container = await self._call(self._get, lease_id)
        except LeaseContainerNotFound:
            return False
        if container.status in _LIVE_STATUSES:
            if spec.owner_of(container.labels) is None:  # made before compute.miner: this store's lease
                log.info("lease=%s live container without a miner label adopted", lease_id)
                return True
            return False  # a live container: the create below refuses it ("already exists")
        try:
            if self.disks is not None:
                await self._call(self.disks.reattach, lease_id, container)  # after a reboot
            await self._call(container.start)
            await self._wait_ready(container.id, await self._call(self._ssh_port_of, container))
        except (APIError, BackendError) as exc:
            log.warning("lease=%s stopped container could not be resumed (%s); recreating it", lease_id, exc)
            await self.stop(lease_id)
            return False
        log.info("lease=%s stopped container resumed", lease_id)
        return True

    async def stop(self, lease_id: str) -> None:
        try:
            await self._call(self._get, lease_id)  # refuses another miner's container
        except LeaseContainerNotFound:
            return
        await self._call(self._remove_lease, lease_id)
        await self.release_network()

    async def release_network(self) -> None:
        """Remove the lease networks and their rules if no lease of this miner is left."""
        for network in (self.lease_network, self.overlay_network):
            if network is None:
                continue
            async with self._start_lock:
                try:
                    await self._call(network.release_if_unused)
                except (DockerException, BackendError) as exc:
                    log.warning("lease network not released: %s", exc)

    async def restart(self, lease_id: str) -> None:
        container = await self._call(self._get, lease_id)
        try:
            await self._call(container.restart, timeout=5)
        except APIError as exc:
            raise BackendError(f"lease {lease_id}: restart failed: {exc.explanation or exc}") from exc
        await self._wait_ready(container.id, await self._call(self._ssh_port_of, container))
        log.info("lease=%s container restarted", lease_id)

    async def set_authorized_key(self, lease_id: str, public_key: str) -> None:
        authorized_key = validate_public_key(public_key)
        container = await self._call(self._get, lease_id)
        await self._call(self._replace_authorized_key, container, authorized_key)
        log.info("lease=%s authorized key replaced; sessions of the old key ended", lease_id)

    async def running(self) -> set[str]:
        return await self._call(self._running)

    async def disk_usage(self) -> dict[str, int]:
        """Bytes each of this miner's live lease containers wrote to its own layer (``SizeRw``:
        Docker walks the layer, so this is slow on big ones; the disk watch calls it rarely)."""
        return await self._call(self._disk_usage, deadline_s=DISK_DEADLINE_S)

    async def activity(self, lease: LeaseRecord) -> Activity:
        """A sample for the idle watch (:mod:`compute.allocation.docker.activity`)."""
        container = await self._call(self._get, lease.lease_id)
        try:
            return await self._call(activity.sample, container, len(lease.gpus))
        except DockerException as exc:
            raise BackendError(f"lease {lease.lease_id}: activity not readable: {exc}") from exc

    async def logs(self, lease_id: str, tail: int) -> tuple[str, list[str]]:
        """The newest ``tail`` lines of the lease container's logs (its sshd, and whatever the
        container's main process printed), with Docker's timestamps."""
        container = await self._call(self._get, lease_id)
        try:
            raw = await self._call(container.logs, tail=tail, timestamps=True)
        except DockerException as exc:
            raise BackendError(f"lease {lease_id}: logs not readable: {exc}") from exc
        return "docker container logs", raw.decode("utf-8", "replace").splitlines()[-tail:]

    # -- extras -------------------------------------------------------------------------

    async def endpoint(self, lease_id: str) -> Endpoint:
        """Rebuild a live lease's endpoint from its container (e.g. after a miner restart)."""
        container = await self._call(self._get, lease_id)
        ports = await self._call(self._published_ports, container)
        extra = {cport: hport for cport, hport in ports.items() if cport != 22}
        host_key = container.labels.get(spec.LABEL_HOST_KEY, "")
        udp = spec.published_ports(container.attrs, "udp")  # read by _published_ports' reload
        return Endpoint(self.public_host, ports[22], USERNAME, host_key, extra, udp)

    @property
    def disk_limit_enforced(self) -> bool | None:
        """True/False once known whether ``disk_gb`` is held by the kernel; None before the probe."""
        return None if self._disk_cap is None else self._disk_cap != "none"

    async def disk_cap(self) -> str:
        """How a lease's disk size is held here, as renters see it: ``kernel`` (the storage driver's
        quota or a filesystem of its own), ``watched`` (advisory: the disk watch stops a lease over
        it) or ``refused`` (cannot be held: leases are refused). Probes the engine once."""
        cap = self._disk_cap or await self._call(self._resolve_disk_cap, deadline_s=START_DEADLINE_S)
        if cap != "none":
            return "kernel"
        return "refused" if self.require_disk_cap else "watched"

    # -- container parameters (pure) -----------------------------------------------------

    def container_kwargs(
        self, lease: LeaseRecord, host_ports: list[int], host_key_line: str
    ) -> dict[str, Any]:
        """Arguments for ``containers.create``: limits, labels, port map, GPUs. No I/O."""
        image = self.templates.resolve(lease.template).image if self.templates else self.image
        network = self.lease_network.name if self.lease_network is not None else self.network
        options = spec.ContainerOptions(
            image,
            self.host,
            self.miner_id,
            self.pids_limit,
            network,
            self.host_cpus if self.host_cpus is not None else _host_cpus(),
            spec.lxcfs_root() if self.local_engine else None,
            self.overlay_network.name if self.overlay_network is not None else None,
        )
        return spec.container_kwargs(
            options,
            lease,
            name=self._container_name(lease.lease_id),
            host_ports=host_ports,
            host_key_line=host_key_line,
            device_ids=[self._gpu_id(index) for index in lease.gpus],
            disk_limit=self._disk_cap in (None, "quota"),  # None: not probed yet (a pure call)
            volume=self._volume_name(lease),
        )

    def _volume_name(self, lease: LeaseRecord) -> str | None:
        if lease.volume is None or self.volumes is None:
            return None
        return self.volumes.docker_name(lease.owner_hotkey, lease.volume)

    def _gpu_id(self, index: int) -> str:
        if self.gpu_uuids is None:
            return str(index)
        return self.gpu_uuids[index]

    def _check_lease(self, lease: LeaseRecord) -> None:
        if not _LEASE_ID.fullmatch(lease.lease_id):
            raise BackendError(f"lease id {lease.lease_id!r} is not a safe container name part")
        if lease.cpu_count <= 0 or lease.memory_mb <= 0:
            raise BackendError("a lease needs a positive cpu_count and memory_mb (no unlimited containers)")
        if not 0 <= lease.extra_ports <= 64:
            raise BackendError(f"extra_ports {lease.extra_ports} out of range 0..64")
        for index in lease.gpus:
            limit = len(self.gpu_uuids) if self.gpu_uuids is not None else 1 << 16
            if not 0 <= index < limit:
                raise BackendError(f"GPU index {index} is not one of this machine's GPUs")

    def _container_name(self, lease_id: str) -> str:
        return f"{self.name_prefix}-{lease_id}"

    # -- blocking Docker work (always called through self._call) ------------------------

    async def _call(
        self, fn: Callable[..., T], *args: Any, deadline_s: float | None = None, **kwargs: Any
    ) -> T:
        """``fn`` in this engine's own threads under a deadline; a missed one is DockerUnavailable."""
        try:
            return await self.calls.run(fn, *args, deadline_s=deadline_s, **kwargs)
        except EngineDeadline as exc:
            raise DockerUnavailable(str(exc)) from exc

    def _client(self) -> docker.DockerClient:
        with self._client_lock:
            if self._client_obj is None:
                try:
                    self._client_obj = docker.from_env()
                except DockerException as exc:
                    raise DockerUnavailable(f"cannot reach the Docker engine: {exc}") from exc
            return self._client_obj

    def _create_and_start(
        self, lease: LeaseRecord, archive: bytes, host_key_line: str
    ) -> tuple[str, dict[int, int], dict[int, int]]:
        """Create the container, give it its disk, copy the files in, start it; retry on a lost port
        race. A lease whose disk size cannot be held is refused here, before anything is made."""
        cap = self._disk_cap or self._resolve_disk_cap()
        if cap == "none" and self.require_disk_cap and lease.disk_gb > 0:
            raise DiskCapUnavailable(
                f"lease {lease.lease_id}: this miner cannot hold a lease's disk size on this engine (no "
                "storage quota, no loop-mounted lease disks); it accepts no lease until it can, or until "
                "its operator accepts advisory sizes (--miner.disk_cap_advisory)"
            )
        for attempt in range(3):
            host_ports = self._pick_ports(1 + lease.extra_ports + (1 if lease.overlay else 0))
            container = self._create(self.container_kwargs(lease, host_ports, host_key_line))
            try:
                if self._disk_cap == "loop" and self.disks is not None and lease.disk_gb > 0:
                    self.disks.attach(lease.lease_id, container, lease.disk_gb)
                if not container.put_archive("/", archive):
                    raise StartFailed(f"lease {lease.lease_id}: could not copy SSH files into the container")
                container.start()
            except (APIError, StartFailed, ImageError) as exc:
                self._remove_lease(lease.lease_id, container)
                if isinstance(exc, ImageError):
                    raise StartFailed(f"lease {lease.lease_id}: its disk could not be made: {exc}") from exc
                if isinstance(exc, APIError) and spec.port_conflict(exc) and attempt < 2:
                    log.info("lease=%s port race lost, retrying with other ports", lease.lease_id)
                    continue
                if isinstance(exc, StartFailed):
                    raise
                raise StartFailed(
                    f"lease {lease.lease_id}: container start failed: {exc.explanation or exc}"
                ) from exc
            ports = {22: host_ports[0]}
            extra = host_ports[1 : 1 + lease.extra_ports]
            ports.update({EXTRA_PORT_BASE + i: port for i, port in enumerate(extra)})
            udp = {spec.OVERLAY_PORT: host_ports[-1]} if lease.overlay else {}
            return container.id, ports, udp
        raise StartFailed(f"lease {lease.lease_id}: no free host port after 3 attempts")

    def _create(self, kwargs: dict[str, Any]) -> Any:
        client = self._client()
        disk = {"quota": "storage-opt", "loop": "loop"}.get(self._disk_cap or "", "advisory")
        kwargs = {**kwargs, "labels": {**kwargs["labels"], "compute.disk_limit": disk}}
        try:
            return client.containers.create(**kwargs)
        except APIError as exc:
            message = str(exc.explanation or exc)
            if "storage_opt" in kwargs and ("storage-opt" in message or "quota" in message):
                log.warning("the storage driver refused --storage-opt size (%s)", message)
                self._disk_cap = without_quota(client, self.disks, self.image, self.require_disk_cap)
                if self._disk_cap == "none" and self.require_disk_cap:
                    raise DiskCapUnavailable(
                        f"the storage driver refused the lease's disk size: {message}"
                    ) from exc
                return self._create({k: v for k, v in kwargs.items() if k != "storage_opt"})
            if exc.status_code == 409:
                raise StartFailed(f"container {kwargs['name']} already exists") from exc
            raise StartFailed(f"container create failed: {message}") from exc
        except DockerException as exc:
            raise DockerUnavailable(f"Docker engine error: {exc}") from exc

    def _resolve_disk_cap(self) -> DiskCap:
        """How this engine holds a lease's disk size (probed once: see ``diskcap.disk_cap_of``)."""
        if self._disk_cap is None:
            try:
                self._disk_cap = disk_cap_of(self._client(), self.disks, self.image, self.require_disk_cap)
            except DockerException as exc:
                raise DockerUnavailable(f"Docker engine error: {exc}") from exc
        return self._disk_cap

    def _pick_ports(self, count: int) -> list[int]:
        ports = pick_free_ports(self.host, self.port_range, self._published_host_ports(), count)
        if ports is None:
            raise NoFreePort(f"no {count} free host ports in {self.port_range[0]}-{self.port_range[1]}")
        return ports

    def _published_host_ports(self) -> set[int]:
        used: set[int] = set()
        for summary in self._client().api.containers(all=True):
            used.update(int(p["PublicPort"]) for p in summary.get("Ports") or [] if p.get("PublicPort"))
        return used

    def _get(self, lease_id: str) -> Any:
        """The lease's container if it is this miner's (or unlabelled, from before ``compute.miner``)."""
        try:
            container = self._client().containers.get(self._container_name(lease_id))
        except NotFound as exc:
            raise LeaseContainerNotFound(f"lease {lease_id} has no container") from exc
        except DockerException as exc:
            raise DockerUnavailable(f"Docker engine error: {exc}") from exc
        if spec.owner_of(container.labels) not in (None, self.miner_id):
            raise LeaseContainerNotFound(f"lease {lease_id}: container {container.name} is another miner's")
        return container

    def _remove_lease(self, lease_id: str, container: Any | None = None) -> None:
        """Remove the lease's container, then its disk (the engine unmounts the layer with it)."""
        layer = None
        if self.disks is not None:
            try:
                layer = layer_dir(container or self._client().containers.get(self._container_name(lease_id)))
            except (ImageError, NotFound):
                pass
            except DockerException as exc:
                raise DockerUnavailable(f"Docker engine error: {exc}") from exc
        self._remove(self._container_name(lease_id))
        if self.disks is not None:
            self.disks.detach(lease_id, layer)

    def _remove(self, name: str) -> None:
        try:
            self._client().containers.get(name).remove(force=True, v=True)
            log.info("container %s removed", name)
        except NotFound:
            return
        except APIError as exc:
            if exc.status_code == 409 and "in progress" in str(exc.explanation):
                return
            raise BackendError(f"could not remove container {name}: {exc.explanation or exc}") from exc

    def _running(self) -> set[str]:
        """Lease ids of this miner's live containers; other miners' and unlabelled ones are skipped."""
        try:
            containers = self._client().containers.list(
                filters={"label": [f"{spec.LABEL_MANAGED}=1"], "status": _LIVE_STATUSES}, sparse=True
            )
        except DockerException as exc:
            raise DockerUnavailable(f"Docker engine error: {exc}") from exc
        found = spec.partition_containers((c.attrs for c in containers), self.miner_id)
        if found.legacy and not self._legacy_warned:
            self._legacy_warned = True
            names = ", ".join(found.legacy[:10])
            log.warning("containers without a compute.miner label are left alone (not adopted): %s", names)
        return set(found.ours)

    def _disk_usage(self) -> dict[str, int]:
        try:
            summaries = self._client().api.containers(
                size=True, filters={"label": [f"{spec.LABEL_MINER}={self.miner_id}"]}
            )
        except DockerException as exc:
            raise DockerUnavailable(f"Docker engine error: {exc}") from exc
        return {
            labels[spec.LABEL_LEASE_ID]: int(summary.get("SizeRw") or 0)
            for summary in summaries
            if (labels := summary.get("Labels") or {}).get(spec.LABEL_LEASE_ID)
        }

    def _replace_authorized_key(self, container: Any, authorized_key: str) -> None:
        """Write ``authorized_keys.new`` then rename it over the old file (atomic when running)."""
        container.reload()
        ssh_dir = f"/{SSH_DIR}"
        if container.status != "running":
            if not container.put_archive(ssh_dir, authorized_keys_archive(authorized_key)):
                raise BackendError("could not write authorized_keys")
            return
        if not container.put_archive(ssh_dir, authorized_keys_archive(authorized_key, "authorized_keys.new")):
            raise BackendError("could not write authorized_keys")
        result = container.exec_run(
            ["mv", "-f", f"{ssh_dir}/authorized_keys.new", f"{ssh_dir}/authorized_keys"], user="root"
        )
        if result.exit_code != 0:
            raise BackendError(f"could not install authorized_keys: {result.output[-200:]!r}")
        ended = container.exec_run(["/bin/sh", "-c", spec.END_SESSIONS_SCRIPT], user="root")
        if ended.exit_code != 0:
            raise BackendError(
                f"new key installed, but old sessions could not be ended: {ended.output[-200:]!r}"
            )

    def _published_ports(self, container: Any) -> dict[int, int]:
        container.reload()
        ports = spec.published_ports(container.attrs)
        if 22 not in ports:
            raise BackendError(f"container {container.name} publishes no SSH port")
        return ports

    def _ssh_port_of(self, container: Any) -> int:
        return self._published_ports(container)[22]

    def _status_and_logs(self, container_id: str) -> tuple[str, str]:
        container = self._client().containers.get(container_id)
        if container.status == "running":
            return container.status, ""
        return container.status, container.logs(tail=20).decode("utf-8", "replace")

    async def _wait_ready(self, container_id: str, port: int) -> None:
        """Wait until sshd sends its banner on ``port``; raise StartFailed after the timeout."""
        target = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        target = self.probe_host or target
        deadline = time.monotonic() + self.ready_timeout_s
        next_check = 0.0
        while time.monotonic() < deadline:
            if await ssh_banner(target, port):
                return
            if time.monotonic() >= next_check:
                status, logs = await self._call(self._status_and_logs, container_id)
                if status in ("exited", "dead"):
                    raise StartFailed(f"container exited before sshd was ready: {logs.strip()[-500:]}")
                next_check = time.monotonic() + 1.0
            await asyncio.sleep(0.1)
        raise StartFailed(f"sshd did not answer on {target}:{port} within {self.ready_timeout_s:.0f}s")


__all__ = [
    "DiskCapUnavailable",
    "DockerBackend",
    "DockerUnavailable",
    "LeaseContainerNotFound",
    "NoFreePort",
    "StartFailed",
]


def _host_cpus() -> tuple[int, ...]:
    """The cores this miner may use (its affinity): the pool lease cpusets are drawn from."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API: leave leases unpinned (quota only)
        return ()
