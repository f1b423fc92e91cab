"""Find rentable machines: ask every serving miner, merge with PoG verdicts, filter and rank.

``discover`` queries each miner on the metagraph that serves an axon for its health, specs and
availability, concurrently (bounded by a semaphore, each miner under one deadline), and merges
what it said with the GPU models validators have *proved* (``VerifiedGpus`` from the PoG
records). A GPU model a miner merely reports is kept but marked unverified.

``matches`` and ``rank`` are pure: they filter machines by what the renter wants and order them
verified first, then the smallest machine that fits (so big machines stay free for big jobs).

Not here: allocation (``compute.operator.service``) and reading the PoG database
(``compute.operator.pog_records``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from compute.operator.errors import MinerIdentityError, MinerOffline, OperatorError
from compute.operator.rpc import Client, MinerRef, call
from compute.protocol import (
    AvailabilityResponse,
    CheckAvailabilityRequest,
    HealthRequest,
    HealthResponse,
    Price,
    Requirements,
    SpecsRequest,
    SpecsResponse,
    VolumeRequest,
)

logger = logging.getLogger(__name__)

GIB = 1024**3
GB = 1000**3


@dataclass(frozen=True)
class VerifiedGpus:
    """What a validator proved about a miner's GPUs with Proof-of-GPU."""

    hotkey: str
    gpu_model: str
    gpu_count: int
    verified_at: float
    tflops_fp16: float | None = None  # the validator's own measurements; None: not measured
    tflops_fp32: float | None = None
    memory_gb: float | None = None  # proven resident memory per GPU
    bandwidth_gbs: float | None = None
    uptime_7d: float | None = None  # share of the validator's tests it passed (a machine feed)
    uptime_30d: float | None = None
    first_proven_at: float | None = None
    # a machine feed's last look: free / partly rented / rented, and when (None: not in the feed)
    seen_state: str | None = None
    seen_at: float | None = None
    # the feed's copy of the miner's signed price, for the proven GPUs (USD/h; informational)
    feed_price_hour: float | None = None


@dataclass(frozen=True)
class Wanted:
    """The renter's filter; zero or None means "any"."""

    gpu_model: str | None = None
    gpu_count: int = 0
    gpu_memory_gb: float = 0.0
    cpu: int = 0
    ram_gb: float = 0.0
    disk_gb: float = 0.0
    extra_ports: int = 0
    available_only: bool = False
    template: str | None = None  # a base image the miner offers (``register.py templates``)
    volume: VolumeRequest | None = None  # a persistent volume to attach (``--volume NAME[:GB]``)
    idle_stop_s: int | None = None  # end the lease after this long idle, as the miner measures it
    max_price: float | None = None  # USD per hour for the machine as asked; None: any (unpriced too)
    overlay: bool = False  # a cluster member joined by the renter's WireGuard overlay (Docker miners)

    def requirements(self) -> Requirements:
        """The wire requirements sent to a miner (its own defaults where we want "any")."""
        return Requirements(
            gpu_count=self.gpu_count,
            gpu_model=self.gpu_model,
            min_gpu_memory_gb=self.gpu_memory_gb,
            cpu_count=max(1, self.cpu),
            memory_gb=self.ram_gb or 1.0,
            disk_gb=self.disk_gb or 5.0,
            extra_ports=self.extra_ports,
            template=self.template,
            volume=self.volume,
            idle_stop_s=self.idle_stop_s,
            overlay=self.overlay,
        )


@dataclass(frozen=True)
class Machine:
    """One miner's machine as the operator sees it."""

    uid: int | None
    hotkey: str
    endpoint: str | None
    online: bool
    error: str | None
    verified: bool
    gpu_model: str | None
    gpu_count: int
    gpu_memory_gb: float  # per GPU, smallest reported
    cpu: int
    ram_gb: float
    disk_gb: float  # free
    available: bool | None
    free_gpus: int | None
    active_leases: int | None
    max_duration_s: int | None
    backend: str | None
    version: str | None
    refused_us: bool = False  # it answered, signed, but declined (e.g. our hotkey has no permit)
    proof: VerifiedGpus | None = None  # what a validator proved (figures shown before committing)
    disk_cap: str | None = None  # how a lease's disk size is held: kernel, watched, refused (None: unsaid)
    price: Price | None = None  # the miner's signed asking price (None: it names none, or predates it)
    gpu_names: tuple[str, ...] = ()  # the GPU names its specs report (the keys of ``price.gpu_hour``)

    def hourly_price(self, gpu_count: int) -> float | None:
        """USD per hour for a lease of ``gpu_count`` of its GPUs at its asking price: the base plus
        each GPU at the dearest of its GPU prices; None when it names no price for its GPUs."""
        if self.price is None:
            return None
        if gpu_count <= 0:
            return self.price.base_hour
        per_gpu = [self.price.gpu_hour.get(name) for name in self.gpu_names]
        if not per_gpu or None in per_gpu:
            return None
        return round(self.price.base_hour + gpu_count * max(p for p in per_gpu if p is not None), 6)

    @property
    def ref(self) -> MinerRef:
        return MinerRef(self.hotkey, self.endpoint, self.uid)

    @property
    def state(self) -> str:
        """offline, rented (nothing left), partly rented, or free."""
        if not self.online:
            return "refused" if self.refused_us else "offline"
        if self.available is False:
            return "rented"
        if self.gpu_count and self.free_gpus is not None:
            if self.free_gpus == 0:
                return "rented"
            return "free" if self.free_gpus >= self.gpu_count else "partly rented"
        return "free" if not self.active_leases else "partly rented"


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", name.lower()).strip()


def model_matches(wanted: str, actual: str | None) -> bool:
    """Case- and punctuation-insensitive word match: "h100" matches "NVIDIA H100 80GB HBM3"."""
    if actual is None:
        return False
    want, have = _norm(wanted), f" {_norm(actual)} "
    return bool(want) and f" {want} " in have


def matches(machine: Machine, wanted: Wanted) -> bool:
    """Does ``machine`` satisfy every constraint in ``wanted``?"""
    if wanted.available_only and machine.state not in ("free", "partly rented"):
        return False
    if wanted.gpu_model and not model_matches(wanted.gpu_model, machine.gpu_model):
        return False
    if wanted.max_price is not None:
        price = machine.hourly_price(wanted.gpu_count)
        if price is None or price > wanted.max_price:
            return False
    return (
        machine.gpu_count >= wanted.gpu_count
        and (wanted.gpu_memory_gb <= 0 or machine.gpu_memory_gb >= wanted.gpu_memory_gb)
        and machine.cpu >= wanted.cpu
        and machine.ram_gb >= wanted.ram_gb
        and machine.disk_gb >= wanted.disk_gb
    )


def reliability(machine: Machine) -> float:
    """The validator-measured 30-day uptime in 5 % steps (0 when no feed measured it): machines
    that were there for more of a validator's tests rank first, small differences do not count."""
    uptime = machine.proof.uptime_30d if machine.proof is not None else None
    return 0.0 if uptime is None else int(uptime * 20) / 20


def rank(machines: Iterable[Machine], wanted: Wanted) -> list[Machine]:
    """Online, available, matching machines: verified first, then the most reliable (a machine
    feed's uptime), then the smallest fit, then uid."""
    fit = [m for m in machines if m.online and m.available and matches(m, wanted)]
    return sorted(
        fit,
        key=lambda m: (
            not m.verified,
            -reliability(m),
            m.gpu_count - wanted.gpu_count,
            m.cpu,
            m.ram_gb,
            m.uid if m.uid is not None else 1 << 30,
        ),
    )


def _gpu_summary(specs: SpecsResponse | None) -> tuple[str | None, int, float]:
    if specs is None or not specs.specs.gpus:
        return None, 0, 0.0
    gpus = specs.specs.gpus
    names = sorted({gpu.name for gpu in gpus})
    memory = min(gpu.memory_bytes for gpu in gpus) / GIB
    return " / ".join(names), len(gpus), round(memory, 1)


def build_machine(
    miner: MinerRef,
    health: HealthResponse | None,
    specs: SpecsResponse | None,
    availability: AvailabilityResponse | None,
    verified: VerifiedGpus | None,
    error: str | None,
) -> Machine:
    """Merge what a miner said with what PoG proved (the proof wins for model and count)."""
    model, count, memory = _gpu_summary(specs)
    if verified is not None:
        model, count = verified.gpu_model, verified.gpu_count
    s = specs.specs if specs is not None else None
    return Machine(
        uid=miner.uid,
        hotkey=miner.hotkey,
        endpoint=miner.endpoint,
        online=health is not None or specs is not None,
        error=error,
        verified=verified is not None,
        gpu_model=model,
        gpu_count=count,
        gpu_memory_gb=memory,
        cpu=s.cpu_cores if s else 0,
        ram_gb=round(s.ram_bytes / GIB, 1) if s else 0.0,
        disk_gb=round(s.disk_free_bytes / GB, 1) if s else 0.0,
        available=availability.available if availability is not None else None,
        free_gpus=availability.free_gpus if availability is not None else None,
        active_leases=health.active_leases if health is not None else None,
        max_duration_s=availability.max_duration_s if availability is not None else None,
        backend=s.backend if s else (health.backend if health else None),
        version=health.version if health is not None else (s.miner_version if s else None),
        proof=verified,
        disk_cap=s.disk_cap if s else None,
        price=availability.price if availability is not None else None,
        gpu_names=tuple(gpu.name for gpu in s.gpus) if s else (),
    )


async def probe(
    client: Client, miner: MinerRef, requirements: Requirements, verified: VerifiedGpus | None
) -> Machine:
    """Ask one miner for health, specs and availability (with its asking price) at once; never
    raises. A miner that names no price, or predates prices, is a machine without a price."""
    results = await asyncio.gather(
        call(client, miner, HealthRequest()),
        call(client, miner, SpecsRequest()),
        call(client, miner, CheckAvailabilityRequest(requirements=requirements)),
        return_exceptions=True,
    )
    answers: list[object | None] = []
    errors: list[str] = []
    for result in results:
        if isinstance(result, OperatorError):
            answers.append(None)
            errors.append(result.message)
        elif isinstance(result, BaseException):
            logger.warning("probe failed hotkey=%s: %r", miner.hotkey, result)
            answers.append(None)
            errors.append(f"unexpected error: {result!r}")
        else:
            answers.append(result)
    health, specs, availability = answers
    error = errors[0] if errors else None
    machine = build_machine(miner, health, specs, availability, verified, error)  # type: ignore[arg-type]
    refused = [
        r
        for r in results
        if isinstance(r, OperatorError) and not isinstance(r, (MinerOffline, MinerIdentityError))
    ]
    return replace(machine, refused_us=bool(refused)) if refused and not machine.online else machine


async def discover(
    client: Client,
    miners: Sequence[MinerRef],
    wanted: Wanted,
    verified: Mapping[str, VerifiedGpus],
    concurrency: int = 32,
    deadline_s: float = 30.0,
) -> list[Machine]:
    """Probe every miner (at most ``concurrency`` at once, each within ``deadline_s``)."""
    gate = asyncio.Semaphore(max(1, concurrency))
    requirements = wanted.requirements()

    async def one(miner: MinerRef) -> Machine:
        async with gate:
            try:
                return await asyncio.wait_for(
                    probe(client, miner, requirements, verified.get(miner.hotkey)), deadline_s
                )
            except asyncio.TimeoutError:
                empty = build_machine(miner, None, None, None, verified.get(miner.hotkey), None)
                return replace(empty, error=f"no answer within {deadline_s:.0f} s")

    machines = await asyncio.gather(*(one(m) for m in miners))
    logger.info("discovered miners=%d online=%d", len(machines), sum(m.online for m in machines))
    return list(machines)
