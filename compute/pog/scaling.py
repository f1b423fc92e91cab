"""Multi-GPU scaling (validator side): efficiency, credited GPU count, GPU-set change detection.

In one round the validator times all GPUs together (one challenge with ``gpu_count`` = N, every
sub-challenge verified on its own) and each GPU alone (worker op ``commit_on`` with a 1-GPU challenge
on device i). From those figures, all measured on its clock:
- ``scaling_efficiency`` = together throughput / sum of alone throughputs;
- ``credited_gpus``: which GPUs count. The count is bounded by what was proven CONCURRENTLY on the
  validator's clock (the sub-challenges of the together run, verified one by one); the alone
  answers, which the miner controls (it can slow or withhold them), may only lower it: a GPU whose
  alone answer is slower than its concurrent share (or missing) is dropped, and alone answers much
  faster than the concurrent share reveal one device serving several sub-challenges. Per-GPU
  credit itself comes from the concurrent figures and the table (``compute.scoring.value``), so a
  device that splits itself into k claimed GPUs proves 1/k of its figures on each;
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
    delivered: float  # together throughput in units of the fastest alone throughput
    credited: int
    counted: tuple[bool, ...] = ()  # per GPU: verified together and not dropped by its alone answer


def credited_gpus(
    claimed: int,
    verified: Sequence[bool],
    together_tflops: Sequence[float],
    alone_tflops: Sequence[float | None],
    min_efficiency: float = 0.9,
) -> Credit:
    """GPUs to credit, never more than the sub-challenges verified concurrently.

    - GPU i counts only if its concurrent sub-challenge verified and its alone figure (``None`` =
      withheld or failed) is at least ``min_efficiency`` x its concurrent figure: alone, a GPU is
      never slower than in company, so a slow or missing alone answer only removes that GPU.
    - Sharing: delivered = (sum of counted concurrent figures) / fastest alone figure; at most
      ``floor(delivered / min_efficiency)`` GPUs are credited (one device answering for two
      delivers 1.0 when it answers alone at full speed).
    Slowing alone answers can lower the fastest alone figure only down to the point where the GPUs
    drop out, so it never raises the count above the concurrent proof; an honest box keeps N.
    """
    if claimed < 0 or len(verified) != claimed:
        raise ScalingError(f"{len(verified)} verification results for {claimed} claimed GPUs")
    if claimed == 0:
        return Credit(0, 0, 0.0, 0)
    together = _positive(together_tflops, "together_tflops")
    if len(together) != claimed or len(alone_tflops) != claimed:
        raise ScalingError(
            f"{len(together)} together and {len(alone_tflops)} alone figures for {claimed} GPUs"
        )
    alone = [_alone(a) for a in alone_tflops]
    counted = tuple(
        bool(v) and t > 0 and a >= min_efficiency * t
        for v, t, a in zip(verified, together, alone, strict=True)
    )
    fastest = max(alone)
    delivered = sum(t for t, c in zip(together, counted, strict=True) if c) / fastest if fastest > 0 else 0.0
    credited = min(sum(counted), math.floor(delivered / min_efficiency + 1e-9))
    return Credit(claimed, sum(1 for v in verified if v), delivered, max(0, credited), counted)


def _alone(value: float | None) -> float:
    """A usable alone figure, or 0 (withheld, failed, non-finite or negative)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0


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
