"""Values the validator store reads and writes: frozen dataclasses, no I/O.

They describe what the validator learnt (one PoG result per miner per round), what it concluded
(scores) and what it told the chain (weights). Validation of miner-supplied data happens before a
record is built (``compute.pog`` verdicts, ``compute.protocol`` messages); these are trusted values,
except the text a result quotes from a miner, which ``PogResult`` keeps printable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from compute.peertext import printable

MAX_TEXT = 1000  # a reason, model name or UUID kept in a result (characters)


@dataclass(frozen=True)
class RoundRecord:
    """One validation round: opened at ``started`` (chain ``block``), closed at ``finished``."""

    round_id: int
    block: int
    started: float
    finished: float | None = None


@dataclass(frozen=True)
class PogResult:
    """The outcome of testing one miner in one round.

    ``ok`` is True only when every GPU's proof verified; ``sample`` is the machine score the round
    derived (0 on any failure). ``rented`` marks a miner whose GPUs were all rented out and which
    was only checked for liveness. ``models`` is one identified model name per GPU.

    In-depth figures (docs/pog-depth.md), None when not measured: ``mem_gbs`` (median GB/s over the
    GPUs, validator clock), ``mem_proven_gb`` (size of the resident matrix per GPU when both memory
    judges passed, else 0), ``sustained_ratio`` / ``sustained_factor`` (last/first throughput and
    the score multiplier), ``scaling_efficiency`` and ``credited_gpus`` (GPUs credited after the
    scaling test), ``host`` (cpu_cores, cpu_gbs, ram_gb, disk_gb proven inside the lease). Sustained
    and host figures are measured every few rounds and carried forward; ``depth_round`` is the round
    that measured them. ``gpu_uuids`` is the GPU set the machine reported; ``history_reset`` marks a
    round where that set changed, so the score history restarted.
    """

    round_id: int
    uid: int
    hotkey: str
    ok: bool
    sample: float
    reasons: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    tflops_fp16: float | None = None
    tflops_fp32: float | None = None
    gpu_count: int = 0
    rented: bool = False
    timings: Mapping[str, float] = field(default_factory=dict)
    block: int = 0
    created: float = 0.0
    mem_gbs: float | None = None
    mem_proven_gb: float | None = None
    sustained_ratio: float | None = None
    sustained_factor: float | None = None
    scaling_efficiency: float | None = None
    credited_gpus: int | None = None
    host: Mapping[str, float] = field(default_factory=dict)
    gpu_uuids: tuple[str, ...] = ()
    depth_round: int | None = None
    history_reset: bool = False
    # Rental truth (docs/validator.md): factors in [0, 1] the sample is multiplied by, None when
    # not measured. ``rented_fraction``: verified rented GPUs / claimed GPUs (rented rounds only);
    # ``availability``: canary rentals that worked; ``rental_uptime``: verified rentals that
    # stayed reachable; ``shared_with``: uids found on the same device (credited once).
    rented_fraction: float | None = None
    availability: float | None = None
    rental_uptime: float | None = None
    shared_with: tuple[int, ...] = ()
    # Multi-host miners (docs/validator.md): each host proven alone; host name -> the sample it was
    # credited (0: unproven, or the same device as another host). Empty for a single-host miner.
    hosts: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # reasons and names quote miners (refusals, worker errors, reported names): kept printable,
        # so the round table, the log, the dashboard and wandb show them and nothing else
        for name in ("reasons", "models", "gpu_uuids"):
            value = getattr(self, name)
            if not all(isinstance(v, str) and v.isprintable() and len(v) <= MAX_TEXT for v in value):
                object.__setattr__(self, name, tuple(printable(v, MAX_TEXT) for v in value))
        if not all(isinstance(k, str) and k.isprintable() and len(k) <= 64 for k in self.hosts):
            object.__setattr__(self, "hosts", {printable(k, 64): v for k, v in self.hosts.items()})


@dataclass(frozen=True)
class ScoreRecord:
    """A miner's moving-average score as of ``updated``."""

    uid: int
    hotkey: str
    score: float
    updated: float


@dataclass(frozen=True)
class ScoreUpdate:
    """One score change a round applies: ``uid`` (owned by ``hotkey``) moves to ``score``."""

    uid: int
    hotkey: str
    score: float


@dataclass(frozen=True)
class WeightsRecord:
    """One attempt to set weights on chain."""

    block: int
    weights: Mapping[int, float]
    version_key: int
    ok: bool
    error: str | None
    created: float
