"""What a canary rental asks for: drawn from the asks of real renters through ``register.py``.

A miner decides to serve or refuse an allocate request from what it sees then: the signer, the
requirements, the term, the idempotency key, the template, the calls before it. A canary is an
observation of how the miner treats renters only if none of these tells it apart, so each field is
drawn from one table of what renters ask with ``register.py allocate`` (its defaults first: no
``--hours`` is one hour, no ``--cpu/--ram/--disk`` is 1 CPU, 1 GiB, 5 GB; no ``--template`` is
the miner's default), the GPU count and resources capped by what the machine offers (a renter
filters by them), and a term no longer than the miner's advertised maximum. The idempotency key
and the SSH key come from the operator service itself (``compute.operator``), as for any renter.

``RENTER_ASKS`` is the one table: change it when register.py's defaults or the asks seen on the
network change. ``plain`` is the shape every miner must serve (register.py's defaults, the drawn
GPUs and term): a canary asking more that a miner does not support is asked again as ``plain``,
as a renter would. Pure: takes a ``random.Random``; no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from compute.protocol import MAX_LEASE_SECONDS, MIN_LEASE_SECONDS

HOUR = 3600
DAY = 24 * HOUR
ALL_GPUS = -1  # "--gpu-count" equal to the machine's GPUs


@dataclass(frozen=True)
class RenterAsks:
    """Weighted choices per field: ``((value, weight), ...)``; weights need not sum to 1."""

    terms_s: tuple[tuple[int, float], ...]
    gpus: tuple[tuple[int, float], ...]
    cpus: tuple[tuple[int, float], ...]
    ram_gb: tuple[tuple[float, float], ...]
    disk_gb: tuple[tuple[float, float], ...]
    ports: tuple[tuple[int, float], ...]
    template_share: float  # renters who list the miner's templates first and pick one of them


RENTER_ASKS = RenterAsks(
    terms_s=(
        (HOUR, 0.40),  # register.py's default term
        (HOUR // 2, 0.04),
        (90 * 60, 0.03),
        (2 * HOUR, 0.10),
        (3 * HOUR, 0.04),
        (4 * HOUR, 0.08),
        (6 * HOUR, 0.04),
        (8 * HOUR, 0.05),
        (12 * HOUR, 0.06),
        (DAY, 0.08),
        (2 * DAY, 0.03),
        (3 * DAY, 0.02),
        (7 * DAY, 0.02),
        (30 * DAY, 0.01),
    ),
    gpus=((1, 0.55), (2, 0.20), (4, 0.12), (8, 0.08), (ALL_GPUS, 0.05)),
    cpus=((1, 0.60), (2, 0.10), (4, 0.15), (8, 0.10), (16, 0.05)),  # 1: register.py's default
    ram_gb=((1.0, 0.55), (4.0, 0.10), (8.0, 0.10), (16.0, 0.12), (32.0, 0.08), (64.0, 0.05)),
    disk_gb=((5.0, 0.60), (10.0, 0.10), (20.0, 0.10), (50.0, 0.10), (100.0, 0.10)),
    ports=((0, 0.80), (1, 0.10), (2, 0.05), (4, 0.05)),
    template_share=0.25,
)


@dataclass(frozen=True)
class Machine:
    """What the canary knows of the machine before asking (its ``register.py resources`` line)."""

    gpus: int
    cpus: int = 0  # 0: unknown (no cap from it)
    ram_gb: float = 0.0
    disk_gb: float = 0.0
    max_term_s: int = MAX_LEASE_SECONDS
    templates: tuple[str, ...] = ()  # listed by this renter (``template_share`` of them): it picks one


@dataclass(frozen=True)
class RentalShape:
    """One rental request's shape (what ``register.py allocate`` flags would say)."""

    gpu_count: int
    cpu_count: int
    ram_gb: float
    disk_gb: float
    ports: int
    term_s: int
    template: str | None = None

    def plain(self) -> RentalShape:
        """The same GPUs and term with register.py's defaults for the rest (every miner serves it)."""
        return replace(self, cpu_count=1, ram_gb=1.0, disk_gb=5.0, ports=0, template=None)

    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds the full term would hold (the canary releases long before)."""
        return float(self.gpu_count * self.term_s)


def _pick(rng: random.Random, table: Sequence[tuple[float, float]]) -> float:
    values, weights = zip(*table, strict=True)
    return rng.choices(values, weights=weights)[0]


def _capped(value: float, have: float, floor: float, share: float = 0.5) -> float:
    """``value``, but at most ``share`` of what the machine has (never below register.py's ``floor``)."""
    return value if have <= 0 else min(value, max(floor, have * share))


def draw_shape(rng: random.Random, machine: Machine, asks: RenterAsks = RENTER_ASKS) -> RentalShape:
    """One rental ask for ``machine``, from the renters' table."""
    gpus = int(_pick(rng, asks.gpus))
    gpus = machine.gpus if gpus == ALL_GPUS else min(gpus, machine.gpus)
    terms = [(t, w) for t, w in asks.terms_s if t <= machine.max_term_s]
    terms = terms or [(max(MIN_LEASE_SECONDS, machine.max_term_s), 1.0)]
    template = rng.choice(sorted(machine.templates)) if machine.templates else None
    return RentalShape(
        gpu_count=max(0, gpus),
        cpu_count=int(_capped(_pick(rng, asks.cpus), machine.cpus, 1)),
        ram_gb=float(_capped(_pick(rng, asks.ram_gb), machine.ram_gb, 1.0)),
        disk_gb=float(_capped(_pick(rng, asks.disk_gb), machine.disk_gb, 5.0)),
        ports=int(_pick(rng, asks.ports)),
        term_s=int(_pick(rng, terms)),
        template=template,
    )


__all__ = ["ALL_GPUS", "RENTER_ASKS", "Machine", "RentalShape", "RenterAsks", "draw_shape"]
