"""Sustained throughput (validator side): segment plan and throughput-series analysis.

A sustained round is ``segments`` small GEMM challenges run back to back (prover:
``depth_engine.SustainedRunner``, worker op ``sustained``); each segment's commitment arrives as its
own line and the validator timestamps it. Segment k's duration is arrival[k] - arrival[k-1]
(segment 0 measured from the moment the request was sent), so its throughput is
``flops_per_segment / duration`` on the validator's clock. ``analyse_series`` compares the mean of
the last segments with a REFERENCE the miner cannot lower without losing credit: the validator-timed
GEMM throughput of the same GPUs this round times the class's segment fraction. A ratio below
``1 - tolerance`` is throttling and lowers the score by ``sustained_factor``.

The factor depends on the last segments alone (and on the GEMM proof, which pays by itself): pacing
can only slow them, so it can only lower the factor, on any class, whatever its segments' honest
speed. The device's own first segments are never a reference: they are the miner's to slow, and a
reference that rose with them (the former ``max(first segments, fraction x GEMM)``) paid a device
that paced every segment to its throttled speed from the start (CPU class, segment/GEMM 1.18,
throttling to 70 %: factor 0.92 paced vs 0.78 honest). What it costs: a device whose segments run
faster than its class's fraction may throttle down to that fraction before the factor drops,
paced or not. ``reference_fraction_for`` takes the calibrated fraction of the device's class
(``sustained.reference_fractions``, measured with ``python -m compute bench pog-depth --suite
sustained``: its ``segment_over_gemm``), never lower than any class the miner claims or is
identified as (a claim can only raise the reference). A throttled verdict is re-confirmed by a
second run against the same reference before it is carried for rounds (``confirmed``: the milder of
the two, so a noisy first run is forgiven and pacing the second gains nothing). Every segment is a
normal PoG challenge: the validator opens a few of them (``choose_segments``) and checks them with
``verify``.

Pure functions over numbers and wire models; it does not run segments or talk to the worker.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass, replace

import numpy as np

from .challenge import new_challenge
from .draws import SUSTAINED_SEGMENTS, oracle_rng
from .engine import MAX_N
from .wire import Challenge, Precision

DERIVE_TAG = b"compute-pog-sustained/1"


class SustainedError(ValueError):
    """A plan or series that cannot be analysed (too few segments, bad numbers)."""


@dataclass(frozen=True)
class SustainedPlan:
    base: Challenge  # shapes and the secret from which segment challenges are derived
    segments: int

    @property
    def flops_per_segment(self) -> float:
        return 2.0 * self.base.m * self.base.n * self.base.p * self.base.gpu_count

    def segment(self, index: int) -> Challenge:
        """Segment ``index``'s challenge: id and key derived from the base secret."""
        if not 0 <= index < self.segments:
            raise SustainedError(f"segment {index} out of range 0..{self.segments - 1}")
        digest = hashlib.blake2b(
            DERIVE_TAG
            + bytes.fromhex(self.base.key)
            + bytes.fromhex(self.base.challenge_id)
            + index.to_bytes(4, "little"),
            digest_size=32,
        ).digest()
        return self.base.model_copy(update={"challenge_id": digest[:16].hex(), "key": digest[16:].hex()})

    def challenges(self) -> list[Challenge]:
        return [self.segment(k) for k in range(self.segments)]


def plan_sustained(
    expected_tflops: float,
    precision: Precision = "fp16",
    gpu_count: int = 1,
    duration_s: float = 60.0,
    segment_s: float = 2.0,
    m: int = 2048,
    rng: np.random.Generator | None = None,
) -> SustainedPlan:
    """Segments of about ``segment_s`` each on a device of ``expected_tflops`` (per GPU), enough of
    them to last ``duration_s``; output m x m per segment so the prover keeps little memory."""
    if not (expected_tflops > 0 and duration_s > 0 and segment_s > 0):
        raise SustainedError("expected_tflops, duration_s and segment_s must be positive")
    n = int(expected_tflops * 1e12 * segment_s / (2 * m * m))
    n = max(256, min(MAX_N, n - n % 256))
    segments = max(4, min(1024, round(duration_s / segment_s)))
    base = new_challenge(precision, m, n, m, gpu_count, rng=rng)
    return SustainedPlan(base=base, segments=segments)


@dataclass(frozen=True)
class SustainedReport:
    tflops: tuple[float, ...]  # per segment, validator clock
    first_tflops: float
    last_tflops: float
    ratio: float  # last / reference (last / first only without a reference)
    throttled: bool
    factor: float  # multiplier for the score, 1.0 when within tolerance
    reference_tflops: float = 0.0  # validator-timed GEMM reference (0: none, the first window alone)
    runs: int = 1  # 2: a throttled verdict was re-confirmed by a second run (``confirmed``)


def sustained_factor(ratio: float, tolerance: float = 0.1, floor: float = 0.0) -> float:
    """1 when ``ratio >= 1 - tolerance``; else ``ratio / (1 - tolerance)``, never below ``floor``."""
    if not math.isfinite(ratio) or ratio <= 0:
        return floor
    return max(floor, min(1.0, ratio / (1.0 - tolerance)))


def analyse_series(
    sent_at: float,
    arrivals: list[float],
    flops_per_segment: float,
    window: float = 0.2,
    tolerance: float = 0.1,
    reference_tflops: float | None = None,
) -> SustainedReport:
    """Throughput per segment from arrival times; ratio = last-``window`` mean / ``reference_tflops``
    (same unit as the series: all GPUs together; the validator-timed GEMM of this round times the
    class's fraction). Only without a usable reference (non-finite or non-positive: benchmarks, a
    series without a GEMM proof) is the first-``window`` mean the yardstick instead."""
    times = [float(sent_at), *map(float, arrivals)]
    if len(arrivals) < 2 or any(not math.isfinite(t) for t in times):
        raise SustainedError("need at least 2 finite segment arrivals")
    durations = [b - a for a, b in zip(times[:-1], times[1:], strict=True)]
    if any(d <= 0 for d in durations):
        raise SustainedError("segment arrivals must be strictly increasing after the request")
    tflops = tuple(flops_per_segment / d / 1e12 for d in durations)
    k = max(1, int(len(tflops) * window))
    first = float(np.mean(tflops[:k]))
    last = float(np.mean(tflops[-k:]))
    reference = _reference(reference_tflops)
    ratio = last / (reference or first)
    factor = sustained_factor(ratio, tolerance)
    return SustainedReport(tflops, first, last, ratio, factor < 1.0, factor, reference)


def _reference(value: float | None) -> float:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0


def reference_fraction_for(classes, fractions: dict[str, float], default: float) -> float:
    """The segment/GEMM fraction for a device of ``classes`` (claimed and identified model names):
    the largest calibrated one among them (``default`` for a class not calibrated). A claim can only
    raise it, so naming another class never loosens the reference."""
    return max([fractions.get(name, default) for name in classes if name] or [default])


def confirmed(first: SustainedReport, second: SustainedReport) -> SustainedReport:
    """The verdict of a throttled run re-run at once: the milder of the two (noise is forgiven, a
    throttling device shows it twice), marked ``runs=2``. The second run is analysed against the
    first one's reference (``confirmation_reference``), so pacing it only lowers it."""
    kept = second if second.factor > first.factor else first
    return replace(kept, runs=2)


def confirmation_reference(first: SustainedReport) -> float:
    """What the confirming run is compared with: the first run's reference (its first window only
    when it had none, as ``analyse_series`` did)."""
    return first.reference_tflops or first.first_tflops


def choose_segments(plan: SustainedPlan, count: int = 3, rng: np.random.Generator | None = None) -> list[int]:
    """Segments to open, always including the last one (throttling hides at the end)."""
    rng = (
        rng
        or oracle_rng(SUSTAINED_SEGMENTS, plan.segment(0).challenge_id)
        or np.random.default_rng(secrets.randbits(64))
    )
    others = rng.choice(plan.segments - 1, size=min(count - 1, plan.segments - 1), replace=False)
    return sorted({plan.segments - 1, *(int(i) for i in others)})
