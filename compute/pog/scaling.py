"""Multi-GPU scaling (validator side): efficiency, credited GPU count, GPU-set change detection.

In one round the validator times all GPUs together (one challenge with ``gpu_count`` = N, every
sub-challenge verified on its own) and each GPU alone (worker op ``commit_on`` with a 1-GPU challenge
on device i). From those figures, all measured on its clock:
- ``scaling_efficiency`` = together throughput / sum of alone throughputs;
- ``credited_gpus``: a machine claiming N GPUs but delivering fewer (one GPU serving two
  sub-challenges runs them at half speed) is credited with what it delivered;
- ``uuid_change`` / ``history_after``: a changed set of GPU UUIDs between rounds resets the miner's
  history (UUIDs are reported by the machine: a claim, used only to notice swaps).

Pure functions; no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class ScalingError(ValueError):
    """Figures that cannot be compared (no GPUs, negative or non-finite throughput)."""


def _positive(values: Iterable[float], what: str) -> list[float]:
    out = [float(v) for v in values]
    if not out or any(not math.isfinite(v) or v < 0 for v in out):
        raise ScalingError(f"{what} must be a non-empty list of finite non-negative numbers")
    return out


def scaling_efficiency(together_tflops: Sequence[float], alone_tflops: Sequence[float]) -> float:
    """Sum of per-GPU throughput measured together / sum measured alone (1.0 = perfect)."""
    together = _positive(together_tflops, "together_tflops")
    alone = _positive(alone_tflops, "alone_tflops")
    if len(together) != len(alone):
        raise ScalingError(f"{len(together)} together figures for {len(alone)} alone figures")
    total_alone = sum(alone)
    return sum(together) / total_alone if total_alone > 0 else 0.0


@dataclass(frozen=True)
class Credit:
    claimed: int
    verified: int
    delivered: float  # together throughput in units of one GPU's alone throughput
    credited: int


def credited_gpus(
    claimed: int,
    verified: Sequence[bool],
    together_tflops: Sequence[float],
    alone_tflops: Sequence[float],
    min_efficiency: float = 0.9,
) -> Credit:
    """GPUs to credit: at most the verified ones, and at most ``floor(delivered / min_efficiency)``
    where delivered = together total / median alone figure. An honest 8-GPU box at >= 0.9
    efficiency keeps 8; one GPU answering for two delivers 1.0 and is credited 1."""
    if claimed < 0 or len(verified) != claimed:
        raise ScalingError(f"{len(verified)} verification results for {claimed} claimed GPUs")
    if claimed == 0:
        return Credit(0, 0, 0.0, 0)
    together = _positive(together_tflops, "together_tflops")
    alone = sorted(_positive(alone_tflops, "alone_tflops"))
    if len(together) != claimed:
        raise ScalingError(f"{len(together)} together figures for {claimed} claimed GPUs")
    reference = (
        alone[len(alone) // 2]
        if len(alone) % 2
        else (alone[len(alone) // 2 - 1] + alone[len(alone) // 2]) / 2
    )
    ok = sum(1 for v in verified if v)
    delivered = (
        sum(t for t, v in zip(together, verified, strict=True) if v) / reference if reference > 0 else 0.0
    )
    credited = min(ok, claimed, math.floor(delivered / min_efficiency + 1e-9))
    return Credit(claimed, ok, delivered, max(0, credited))


@dataclass(frozen=True)
class UuidChange:
    changed: bool
    added: frozenset[str]
    removed: frozenset[str]


def uuid_change(previous: Iterable[str] | None, current: Iterable[str]) -> UuidChange:
    """Compare GPU UUID sets (order-insensitive, blank entries ignored); None = first sighting."""
    now = frozenset(u.strip().lower() for u in current if isinstance(u, str) and u.strip())
    if previous is None:
        return UuidChange(False, now, frozenset())
    before = frozenset(u.strip().lower() for u in previous if isinstance(u, str) and u.strip())
    return UuidChange(before != now, now - before, before - now)


def history_after(previous: Iterable[str] | None, current: Iterable[str], history: list[T]) -> list[T]:
    """The history to keep for the miner: unchanged when the GPU set is the same, empty when it changed."""
    return [] if uuid_change(previous, current).changed else list(history)
