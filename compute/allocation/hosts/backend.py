"""One miner, several Docker hosts: a backend that routes each lease to its host's engine.

Each host of the hosts file (:mod:`compute.allocation.hosts.config`) gets its own
:class:`~compute.allocation.docker.backend.DockerBackend` over its own ``docker.DockerClient``
(``unix://``, ``tcp://`` with mutual TLS, or ``ssh://``: Docker's own remote API, no agent of
ours on the host). A lease records its host (``LeaseRecord.host``); start, stop, restart and key
exchange go to that host's backend with the lease's miner-wide GPU indices translated to the
host's device indices, and ``running()`` is the union over the hosts that answer.

Host health: :meth:`MultiHostBackend.check_hosts` checks each host (reachable, runtime, base
image, the offered GPUs) through :mod:`compute.allocation.hosts.check`; a host that fails is
``down`` with its reason, takes no new lease, and its leases fail fast (:class:`HostDown`) instead
of waiting on a dead engine. A host found down in ``running()`` is marked down at once. Every
call to a host runs in that host's own threads under its deadline (``deadline_s`` in the hosts
file; ``compute.allocation.lease.engine``): a slow or silent engine misses it, is marked down,
and never takes a thread another host, the store or the miner's API needs.

Deliberately not here: which lease may have which GPUs (the manager and store decide; the
:meth:`place` hook only says which host can hold them) or the periodic loop (``hostwatch``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from compute.allocation.docker.backend import DockerBackend, DockerUnavailable
from compute.allocation.docker.templates import TemplateCatalog
from compute.allocation.hosts.check import CHECK_DEADLINE_S, HostCheck, check_host, docker_client
from compute.allocation.hosts.config import HostConfig
from compute.allocation.lease.activity import Activity
from compute.allocation.lease.backend import BackendError
from compute.allocation.lease.engine import EngineCalls, EngineDeadline
from compute.allocation.lease.records import Endpoint, LeaseRecord
from compute.protocol import GpuSpec, HostSpec

log = logging.getLogger(__name__)


class HostDown(BackendError):
    """The lease's host is down (unreachable or failing its checks)."""


class NoPlacement(BackendError):
    """No healthy host has the requested free GPUs."""


@dataclass
class HostState:
    """A host's backend and its last check (mutable: the watch updates it)."""

    config: HostConfig
    backend: DockerBackend
    calls: EngineCalls  # this host's own threads and per-call deadline (shared with its backend)
    up: bool = False
    reason: str = "not checked yet"
    checked_at: float = 0.0
    check: HostCheck | None = None
    gpus: list[GpuSpec] = field(default_factory=list)


def _state(config: HostConfig, backend: DockerBackend) -> HostState:
    calls = getattr(backend, "calls", None) or EngineCalls(config.name, deadline_s=config.deadline_s)
    return HostState(config, backend, calls, gpus=_unknown_gpus(config))


def _unknown_gpus(config: HostConfig) -> list[GpuSpec]:
    return [GpuSpec(index=g, name="unknown (host not checked)", memory_bytes=0) for g in config.global_gpus]


class MultiHostBackend:
    """The ``Backend`` of a miner with a hosts file; also the manager's placement policy."""

    name = "docker"
    overlay = True  # every host's DockerBackend gives cluster members their overlay

    def __init__(
        self,
        hosts: Sequence[HostConfig],
        host_of: Callable[[str], str | None],
        make_backend: Callable[[HostConfig], DockerBackend],
        image: str,
        checker: Callable[[HostConfig, str], HostCheck] = check_host,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``host_of(lease_id)`` reads a lease's host (the store); ``image`` is checked on every host."""
        if not hosts:
            raise ValueError("a multi-host backend needs at least one host")
        self.hosts = {h.name: _state(h, make_backend(h)) for h in hosts}
        self._host_of = host_of
        self._image = image
        self._checker = checker
        self._clock = clock
        self._seen: dict[str, str] = {}  # lease id -> host it was last found running on

    # ---------------------------------------------------------------- health

    async def check_hosts(self) -> dict[str, bool]:
        """Check every host (concurrently, each in its own threads under ``CHECK_DEADLINE_S``);
        returns which are up. Never raises for a bad host, never waits longer than the deadline."""
        states = list(self.hosts.values())
        checks = await asyncio.gather(
            *(s.calls.run(self._checker, s.config, self._image, deadline_s=CHECK_DEADLINE_S) for s in states),
            return_exceptions=True,
        )
        for state, result in zip(states, checks, strict=True):
            if isinstance(result, EngineDeadline):
                result = HostCheck(
                    False, f"engine too slow: the check did not finish within {CHECK_DEADLINE_S:g}s"
                )
            elif isinstance(result, BaseException):
                result = HostCheck(False, f"check failed: {result!r}"[:300])
            self._record(state, result)
        return {name: s.up for name, s in self.hosts.items()}

    def _record(self, state: HostState, result: HostCheck) -> None:
        was_up, first, reason_before = state.up, state.check is None, state.reason
        state.up, state.reason, state.check = result.up, result.reason, result
        state.checked_at = self._clock()
        if result.gpus:
            state.gpus = list(result.gpus)
        if result.up and result.cpus and state.config.remote:
            state.backend.host_cpus = tuple(range(result.cpus))
        if result.up and not was_up:
            log.info("host=%s up (%s)", state.config.name, state.config.endpoint)
        elif not result.up and (was_up or first or result.reason != reason_before):
            log.warning("host=%s down: %s", state.config.name, result.reason)  # once per change

    def mark_down(self, name: str, reason: str) -> None:
        state = self.hosts[name]
        if state.up:
            log.warning("host=%s down: %s", name, reason)
        state.up, state.reason = False, reason[:300]

    def up_hosts(self) -> list[str]:
        return [name for name, s in self.hosts.items() if s.up]

    def down_report(self) -> dict[str, str]:
        """Each down host and why (logged at start and shown in specs)."""
        return {name: s.reason for name, s in self.hosts.items() if not s.up}

    def probe_addresses(self) -> dict[str, str]:
        """Where the lease watch probes each remote host's leases (their public SSH address)."""
        return {name: s.config.ssh_host for name, s in self.hosts.items() if s.config.remote}

    def host_specs(self) -> list[HostSpec]:
        """What the specs answer says per host (the validator proves each separately)."""
        out = []
        for name, s in self.hosts.items():
            check = s.check
            out.append(
                HostSpec(
                    name=name,
                    up=s.up,
                    reason="" if s.up else s.reason[:300],
                    ssh_host=s.config.ssh_host,
                    gpus=[g.index for g in s.gpus],
                    cpu_cores=check.cpus if check else 0,
                    ram_bytes=check.ram_bytes if check else 0,
                )
            )
        return out

    def gpu_specs(self) -> list[GpuSpec]:
        """Every offered GPU with its miner-wide index (names/UUIDs as last probed)."""
        return [gpu for s in self.hosts.values() for gpu in s.gpus]

    # ---------------------------------------------------------------- placement

    def host_of_gpu(self, index: int) -> str | None:
        for name, s in self.hosts.items():
            if index in s.config.global_gpus:
                return name
        return None

    def usable(self, gpus: list[GpuSpec]) -> list[GpuSpec]:
        """The GPUs of ``gpus`` whose host is up."""
        return [g for g in gpus if (h := self.host_of_gpu(g.index)) is not None and self.hosts[h].up]

    def largest_host(self) -> int:
        return max(len(s.config.gpus) for s in self.hosts.values())

    def place(
        self, candidates: list[GpuSpec], count: int, want: str | None = None
    ) -> tuple[tuple[int, ...], str]:
        """GPUs (miner-wide indices, all on one up host) and that host; best fit, file order on ties.

        ``candidates`` are the free GPUs that match the request. Raises :class:`NoPlacement`.
        """
        if want is not None and want not in self.hosts:
            raise NoPlacement(f"no host {want!r} on this miner (hosts: {', '.join(self.hosts)})")
        fits: list[tuple[int, str, list[int]]] = []
        for name, s in self.hosts.items():
            if not s.up or (want is not None and name != want):
                continue
            free = [g.index for g in candidates if g.index in s.config.global_gpus]
            if len(free) >= count:
                fits.append((len(free), name, free))
        if not fits:
            where = f"host {want}" if want else "any up host"
            down = [f"{n} ({s.reason})" for n, s in self.hosts.items() if not s.up]
            extra = f"; down: {', '.join(down)}" if down else ""
            raise NoPlacement(f"{where} has not {count} matching free GPU(s) on one host{extra}")
        size, name, free = min(fits, key=lambda f: (f[0], list(self.hosts).index(f[1])))
        return tuple(free[:count]), name

    # ---------------------------------------------------------------- Backend protocol

    def _lease_host(self, lease_id: str) -> str | None:
        """The lease's recorded host; for a container the store does not know, where it runs."""
        return self._host_of(lease_id) or self._seen.get(lease_id)

    def _state(self, host: str | None) -> HostState:
        name = host if host is not None else next(iter(self.hosts))  # pre-hosts-file leases: host 1
        state = self.hosts.get(name)
        if state is None:
            raise HostDown(f"host {name!r} is not in the hosts file any more")
        if not state.up:
            raise HostDown(f"host {name} is down: {state.reason}")
        return state

    def _local(self, state: HostState, record: LeaseRecord) -> LeaseRecord:
        """The record the host's backend sees: that host's own device indices."""
        devices = dict(zip(state.config.global_gpus, state.config.gpus, strict=True))
        try:
            return replace(record, gpus=tuple(devices[g] for g in record.gpus))
        except KeyError:
            raise BackendError(
                f"lease {record.lease_id}: GPUs {record.gpus} are not on host {state.config.name}"
            ) from None

    async def _guard(self, state: HostState, call):  # noqa: ANN001, ANN202 - a coroutine
        try:
            return await call
        except DockerUnavailable as exc:
            self.mark_down(state.config.name, str(exc))
            raise HostDown(f"host {state.config.name} is down: {exc}") from exc

    async def start(self, lease: LeaseRecord) -> Endpoint:
        state = self._state(lease.host)
        return await self._guard(state, state.backend.start(self._local(state, lease)))

    async def stop(self, lease_id: str) -> None:
        state = self._state(await asyncio.to_thread(self._lease_host, lease_id))
        await self._guard(state, state.backend.stop(lease_id))

    async def restart(self, lease_id: str) -> None:
        state = self._state(await asyncio.to_thread(self._lease_host, lease_id))
        await self._guard(state, state.backend.restart(lease_id))

    async def set_authorized_key(self, lease_id: str, public_key: str) -> None:
        state = self._state(await asyncio.to_thread(self._lease_host, lease_id))
        await self._guard(state, state.backend.set_authorized_key(lease_id, public_key))

    async def activity(self, lease: LeaseRecord) -> Activity:
        """A sample for the idle watch, from the lease's own host."""
        state = self._state(lease.host)
        return await self._guard(state, state.backend.activity(self._local(state, lease)))

    async def running(self) -> set[str]:
        """Lease ids live on the hosts that answer (asked at once, each within its deadline); a
        host that does not answer in time is marked down."""
        up = [(name, state) for name, state in self.hosts.items() if state.up]
        answers = await asyncio.gather(*(s.backend.running() for _, s in up), return_exceptions=True)
        found: set[str] = set()
        for (name, _), here in zip(up, answers, strict=True):
            if isinstance(here, DockerUnavailable):
                self.mark_down(name, str(here))
                continue
            if isinstance(here, BaseException):
                raise here
            self._seen.update(dict.fromkeys(here, name))
            found |= here
        return found

    async def disk_usage(self) -> dict[str, int]:
        """Each up host's lease containers' own layer sizes (a host that misses it is marked down)."""
        up = [(name, state) for name, state in self.hosts.items() if state.up]
        answers = await asyncio.gather(*(s.backend.disk_usage() for _, s in up), return_exceptions=True)
        found: dict[str, int] = {}
        for (name, _), sizes in zip(up, answers, strict=True):
            if isinstance(sizes, DockerUnavailable):
                self.mark_down(name, str(sizes))
            elif isinstance(sizes, BaseException):
                raise sizes
            else:
                found.update(sizes)
        return found

    @property
    def disk_limit_enforced(self) -> bool | None:
        """Enforced only when every host's storage driver enforces it."""
        known = [s.backend.disk_limit_enforced for s in self.hosts.values()]
        return False if False in known else None if None in known else True

    async def disk_cap(self) -> str | None:
        """The weakest way an up host holds a lease's disk size (``refused`` < ``watched`` < ``kernel``);
        None when no up host's backend says (embedded hosts)."""
        asks = [ask for s in self.hosts.values() if s.up and (ask := getattr(s.backend, "disk_cap", None))]
        if not asks:
            return None
        caps = await asyncio.gather(*(ask() for ask in asks), return_exceptions=True)
        shown = [c for c in caps if isinstance(c, str)]
        return min(shown, key=("refused", "watched", "kernel").index) if shown else "refused"

    async def close(self) -> None:
        for state in self.hosts.values():
            client = getattr(state.backend, "_client_obj", None)
            if client is not None:
                try:
                    await state.calls.run(client.close, deadline_s=5.0)
                except EngineDeadline:
                    log.warning("host=%s: its client did not close within 5s", state.config.name)
            state.calls.close()


def host_backend(
    config: HostConfig,
    miner_id: str,
    image: str,
    templates: TemplateCatalog | None = None,
    bind_host: str = "0.0.0.0",
    *,
    disk_dir: Path | None = None,
    require_disk_cap: bool = False,
    overlay_cidrs: tuple[str, ...] = (),
) -> DockerBackend:
    """A host's own DockerBackend over its own client (lazy: nothing is contacted here).

    Leases get the host's device indices (``gpu_uuids=None``); a remote host publishes on all its
    addresses and is probed at its public SSH address; ``bind_host`` applies to a local one.
    ``disk_dir``/``require_disk_cap``: its lease disks and whether a size it cannot hold refuses the
    lease (a remote engine has no lease disks of this machine: only its storage driver's quota).
    """
    return DockerBackend(
        image=image,
        templates=templates,
        host="0.0.0.0" if config.remote else bind_host,
        ssh_port_range=config.ssh_port_range,
        gpu_uuids=None,
        docker_client=docker_client(config),
        public_host=config.ssh_host,
        miner_id=miner_id,
        isolate=config.isolate,
        probe_host=config.ssh_host if config.remote else None,
        local_engine=not config.remote,
        calls=EngineCalls(config.name, deadline_s=config.deadline_s),
        disk_dir=disk_dir,
        require_disk_cap=require_disk_cap,
        overlay_cidrs=overlay_cidrs,
    )


__all__ = ["HostDown", "HostState", "MultiHostBackend", "NoPlacement", "host_backend"]
