"""Memory capacity and bandwidth proof (validator side): plan, wire models, verification, timing.

A ``MemoryChallenge`` asks each GPU to build a keyed n x n fp32 matrix A (sized to a fraction of the
memory the device should have; each element costs ``hash_rounds`` hash rounds to regenerate), then
run ``passes`` dependent passes ``y_r = A @ tanh(3 y_{r-1} / sqrt(n) + c_{r-1})`` (``c_r`` keyed per
pass and row: no fixed point, so the chain cannot collapse to zero) and stream one leaf hash per
pass (prover: ``depth_engine.MemoryEngine``). The validator timestamps the pass lines, then opens
pass 1 (tied to the keyed start vector) and a few random passes and checks entries of them against
its own float64 regeneration of a few rows of A.

Two independent judges, each naming what caught a cheat:
- mathematics (``verify_memory``): opened vectors hash to the committed leaves, are not degenerate
  (rms at least ``DEGENERATE_RMS_FRACTION`` of the honest scale ``sqrt(n / 3)``), and
  ``y_r[i] = A[i, :] . x_{r-1}`` within a tolerance that separates honest fp32 accumulation from A
  stored in fp16/bf16 (half the memory). Skipped or faked passes fail here.
- time (``judge_memory_timing``): the chain starts from a nonce the validator sends only after A is
  built, so time per pass = (last arrival - start sent) / passes is a sound upper bound on the real
  per-pass time (nothing could be computed before, passes are sequential; it includes one round
  trip). It must be ``min_margin`` x below the fastest possible regeneration of A
  (``n^2 x hash_rounds / max_regen_rate``) and imply a bandwidth above what streaming from host
  memory could deliver. Pass lines spaced faster than any device reads A were buffered (held back
  and released together): rejected as such. A prover that regenerates A per pass, or holds less
  than A, fails here; a slow build cannot hide it, since the chain is unknown until the start.

Numpy only; ``verify_memory`` and ``judge_memory_timing`` never raise. Choosing the shape
(``plan_memory``) uses the table's memory and bandwidth; identification is ``compute.scoring.identify``'s.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import secrets
from dataclasses import dataclass, field
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .depth_engine import (
    MAX_HASH_ROUNDS,
    MAX_MEM_N,
    MAX_PASSES,
    chain_seeds,
    expensive_block_np,
    memory_seeds,
    nonlinear,
    pass_offsets,
    start_vector,
)
from .generator import index_values
from .merkle import leaf_hash

log = logging.getLogger(__name__)

Hex32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
CHEAT_DELTA_FP16_STORAGE = 6e-5  # measured: rms error per element of A stored in fp16 (bf16 is ~8x worse)
DEGENERATE_RMS_FRACTION = 0.25  # honest y_r: rms 0.57..0.76 x sqrt(n/3) (|A| ~ U[-1,1), |x| ~ 0.6..0.75)
Judge = Literal["mathematics", "time"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MemoryChallenge(_Model):  # validator -> worker
    kind: Literal["pog.memory_challenge"] = "pog.memory_challenge"
    challenge_id: Hex32
    key: Hex32
    n: int = Field(ge=16, le=MAX_MEM_N)
    passes: int = Field(ge=2, le=MAX_PASSES)
    hash_rounds: int = Field(ge=1, le=MAX_HASH_ROUNDS)
    gpu_count: int = Field(ge=1, le=16)
    start: Hex32  # secret until A is built: sent with memory_commit, never with memory_build

    @property
    def matrix_bytes(self) -> int:
        return 4 * self.n * self.n

    def build_message(self) -> dict:
        """The ``memory_build`` challenge: everything but the start nonce."""
        return self.model_dump(mode="json", exclude={"start"})

    def start_message(self) -> dict:
        """The ``memory_commit`` request: the start nonce, sent once A is built."""
        return {"challenge_id": self.challenge_id, "start": self.start}


class MemoryCommitment(_Model):  # worker -> validator
    challenge_id: Hex32
    leaves: list[list[Hex64]] = Field(min_length=1, max_length=16)  # per GPU, one per pass
    timings: list[dict] | None = None  # advisory


class MemoryOpenRequest(_Model):  # validator -> worker
    challenge_id: Hex32
    passes: list[list[Annotated[int, Field(ge=1, le=MAX_PASSES)]]] = Field(min_length=1, max_length=16)


class VectorB64(_Model):
    dtype: Literal["<f4"]
    shape: list[Annotated[int, Field(ge=1, le=MAX_MEM_N)]] = Field(min_length=1, max_length=1)
    data: str = Field(max_length=4 * ((4 * MAX_MEM_N + 2) // 3))


class GpuMemoryOpening(_Model):
    indices: list[Annotated[int, Field(ge=1, le=MAX_PASSES)]] = Field(min_length=1, max_length=32)
    vectors: list[VectorB64] = Field(min_length=1, max_length=32)


class MemoryOpening(_Model):  # worker -> validator
    challenge_id: Hex32
    per_gpu: list[GpuMemoryOpening] = Field(min_length=1, max_length=16)


@dataclass(frozen=True)
class MemoryPolicy:
    """Timing thresholds. ``max_regen_rate``: element-rounds/s the fastest device could hash (H100
    estimate ~8e11 from int32 throughput; default 4e12 leaves 5x); ``host_stream_gbs``: what a
    device could stream from host memory (PCIe 5 x16 ~ 64 GB/s); 0 disables (CPU devices)."""

    max_regen_rate: float = 4e12
    min_margin: float = 3.0
    host_stream_gbs: float = 64.0
    min_bandwidth_fraction: float = 0.25
    max_bandwidth_factor: float = 3.0  # pass lines spaced faster than this x the table's GB/s: buffered
    max_device_gbs: float = 20000.0  # the same ceiling when the bandwidth is unknown; 0 disables
    max_bunching: float = 10.0  # lines spaced this x closer than (last - start) / passes, and
    max_lead_s: float = 0.5  # the first one this much later than a pass after the start: buffered


@dataclass(frozen=True)
class GpuMemoryResult:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    caught_by: Judge | None = None
    max_err: float = math.inf
    tol: float = 0.0
    pass_s: float | None = None
    gbs: float | None = None
    regen_bound_s: float | None = None
    margin: float | None = None
    bandwidth_ratio: float | None = None  # measured / table bandwidth when known


@dataclass(frozen=True)
class MemoryVerdict:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    caught_by: Judge | None = None
    per_gpu: list[GpuMemoryResult] = field(default_factory=list)


def plan_memory(
    memory_gb: float,
    bandwidth_gbs: float,
    gpu_count: int = 1,
    fraction: float = 0.6,
    passes: int = 16,
    target_margin: float = 8.0,
    policy: MemoryPolicy | None = None,
    rng: np.random.Generator | None = None,
) -> MemoryChallenge:
    """Size A to ``fraction`` of ``memory_gb`` and pick hash rounds so that regenerating A per pass
    at ``max_regen_rate`` takes ``target_margin`` x longer than reading it at ``bandwidth_gbs``
    (margin = rounds x bandwidth / (4 x rate), independent of n)."""
    policy = policy or MemoryPolicy()
    n = int(math.isqrt(int(fraction * memory_gb * 1e9 / 4)))
    n = max(16, min(MAX_MEM_N, n - n % 16))
    rounds = math.ceil(target_margin * 4 * policy.max_regen_rate / (bandwidth_gbs * 1e9))
    token = (lambda: secrets.token_hex(16)) if rng is None else (lambda: rng.bytes(16).hex())
    return MemoryChallenge(
        challenge_id=token(),
        key=token(),
        n=n,
        passes=passes,
        hash_rounds=max(1, min(MAX_HASH_ROUNDS, rounds)),
        gpu_count=gpu_count,
        start=token(),
    )


def choose_memory_openings(
    challenge: MemoryChallenge, passes_per_gpu: int = 4, rng: np.random.Generator | None = None
) -> MemoryOpenRequest:
    """Passes to open per GPU, drawn after every pass line arrived: always pass 1 (checked against
    the keyed start vector, so the chain is tied to its start) plus ``passes_per_gpu`` distinct
    random passes from 2..passes."""
    rng = rng or np.random.default_rng(secrets.randbits(64))
    count = min(passes_per_gpu, challenge.passes - 1)
    picks = [
        [1] + sorted(int(r) + 2 for r in rng.choice(challenge.passes - 1, count, replace=False))
        for _ in range(challenge.gpu_count)
    ]
    return MemoryOpenRequest(challenge_id=challenge.challenge_id, passes=picks)


def memory_tolerance(n: int) -> float:
    """Geometric mean of the honest fp32 bound ``2^-24 n / 2`` and the fp16-storage error."""
    honest = 2.0**-24 * n / 2
    cheat = CHEAT_DELTA_FP16_STORAGE * math.sqrt(n) * 0.6
    return math.sqrt(honest * cheat)


def expected_rows(challenge: MemoryChallenge, gpu: int, rows: list[int]) -> np.ndarray:
    """Float64 rows of one GPU's A (O(n x hash_rounds) each)."""
    row_seed, col_seed = memory_seeds(bytes.fromhex(challenge.key), gpu)
    row_vals = index_values(row_seed, 0, challenge.n)[rows]
    cols = index_values(col_seed, 0, challenge.n)
    return expensive_block_np(row_vals, cols, challenge.hash_rounds).astype(np.float64)


def degenerate_floor(n: int) -> float:
    """Smallest rms an opened vector may have: a fraction of the honest scale ``sqrt(n / 3)``."""
    return DEGENERATE_RMS_FRACTION * math.sqrt(n / 3.0)


def _decode(vector: VectorB64, n: int) -> np.ndarray:
    if list(vector.shape) != [n]:
        raise ValueError(f"vector shape {vector.shape} != [{n}]")
    raw = base64.b64decode(vector.data, validate=True)
    if len(raw) != 4 * n:
        raise ValueError(f"vector has {len(raw)} bytes, expected {4 * n}")
    values = np.frombuffer(raw, dtype="<f4")
    if not np.isfinite(values).all():
        raise ValueError("vector contains NaN or infinity")
    return values


def _verify_gpu(challenge, gpu, leaves, wanted, opening, rows) -> GpuMemoryResult:
    tol = memory_tolerance(challenge.n)
    fail = lambda reason: GpuMemoryResult(False, [f"gpu {gpu}: {reason}"], "mathematics", tol=tol)  # noqa: E731
    if len(leaves) != challenge.passes:
        return fail(f"{len(leaves)} leaves committed for {challenge.passes} passes")
    needed = sorted({r for p in wanted for r in (p, p - 1)} - {0})
    if list(opening.indices) != needed or len(opening.vectors) != len(needed):
        return fail(f"opened passes {list(opening.indices)} != needed {needed}")
    cid = bytes.fromhex(challenge.challenge_id)
    vectors = {}
    for r, vector in zip(opening.indices, opening.vectors, strict=True):
        try:
            values = _decode(vector, challenge.n)
        except (ValueError, binascii.Error) as exc:
            return fail(f"pass {r}: {exc}")
        if leaf_hash(cid, gpu, r, values).hex() != leaves[r - 1]:
            return fail(f"pass {r}: vector does not match the committed leaf")
        rms = float(np.sqrt(np.mean(np.square(values, dtype=np.float64))))
        if rms < degenerate_floor(challenge.n):
            return fail(
                f"pass {r}: degenerate vector (rms {rms:.3g} below the floor {degenerate_floor(challenge.n):.3g}:"
                " the chain collapsed instead of reading A)"
            )
        vectors[r] = values
    a_rows = expected_rows(challenge, gpu, rows)
    x0_seed, seed = chain_seeds(bytes.fromhex(challenge.key), bytes.fromhex(challenge.start), gpu)
    x0 = start_vector(x0_seed, challenge.n)
    worst, bad = 0.0, []
    for r in wanted:
        if r == 1:
            x = x0
        else:
            x = nonlinear(
                vectors[r - 1].astype(np.float64), challenge.n, pass_offsets(seed, r - 1, challenge.n)
            )
        err = np.abs(vectors[r][rows].astype(np.float64) - a_rows @ x)
        worst = max(worst, float(err.max()))
        if err.max() > tol:
            bad.append(r)
    if bad:
        return GpuMemoryResult(
            False,
            [f"gpu {gpu}: passes {bad} wrong by up to {worst:.3g} (tolerance {tol:.3g})"],
            "mathematics",
            worst,
            tol,
        )
    return GpuMemoryResult(True, [], None, worst, tol)


def verify_memory(
    challenge: MemoryChallenge,
    commitment: MemoryCommitment,
    request: MemoryOpenRequest,
    opening: MemoryOpening,
    rows_per_gpu: int = 8,
    rng: np.random.Generator | None = None,
) -> MemoryVerdict:
    """The mathematics judge: leaves, then sampled entries of every opened pass. Never raises."""
    try:
        ids = {challenge.challenge_id, commitment.challenge_id, request.challenge_id, opening.challenge_id}
        if len(ids) != 1:
            return MemoryVerdict(False, ["challenge ids differ"], "mathematics")
        sizes = (len(commitment.leaves), len(request.passes), len(opening.per_gpu))
        if any(size != challenge.gpu_count for size in sizes):
            return MemoryVerdict(False, [f"expected {challenge.gpu_count} GPUs, got {sizes}"], "mathematics")
        rng = rng or np.random.default_rng(secrets.randbits(64))
        per_gpu = []
        for g in range(challenge.gpu_count):
            rows = sorted(
                int(i) for i in rng.choice(challenge.n, min(rows_per_gpu, challenge.n), replace=False)
            )
            per_gpu.append(
                _verify_gpu(challenge, g, commitment.leaves[g], request.passes[g], opening.per_gpu[g], rows)
            )
        ok = all(result.ok for result in per_gpu)
        reasons = [reason for result in per_gpu for reason in result.reasons]
        return MemoryVerdict(ok, reasons, None if ok else "mathematics", per_gpu)
    except Exception as exc:  # the verdict boundary: malformed input never escapes
        log.warning("memory verification failed on malformed input: %s", exc, exc_info=True)
        return MemoryVerdict(False, [f"malformed input: {type(exc).__name__}: {exc}"], "mathematics")


def _judge_gpu(challenge, gpu, started_at, times, policy, expected_gbs) -> GpuMemoryResult:
    fail = lambda reason: GpuMemoryResult(False, [f"gpu {gpu}: {reason}"], "time")  # noqa: E731
    if len(times) != challenge.passes or any(not math.isfinite(t) for t in times) or sorted(times) != times:
        return fail(f"{len(times)} ordered pass arrivals for {challenge.passes} passes")
    if times[0] <= started_at:
        return fail("a pass line arrived before the start was sent")
    # Sound: the chain cannot begin before the start nonce was sent, and passes are sequential.
    pass_s = (times[-1] - started_at) / challenge.passes
    spacing_s = (times[-1] - times[0]) / (challenge.passes - 1)
    gbs = challenge.matrix_bytes / pass_s / 1e9
    regen = challenge.n**2 * challenge.hash_rounds / policy.max_regen_rate
    margin = regen / pass_s
    ratio = gbs / expected_gbs if expected_gbs else None
    ceiling = expected_gbs * policy.max_bandwidth_factor if expected_gbs else policy.max_device_gbs
    reasons = []
    too_fast = bool(ceiling) and challenge.matrix_bytes / max(spacing_s, 1e-12) / 1e9 > ceiling
    lead_s = times[0] - started_at - spacing_s  # honest: about one round trip
    held = (
        bool(policy.max_bunching) and spacing_s * policy.max_bunching < pass_s and lead_s > policy.max_lead_s
    )
    if too_fast or held:
        reasons.append(
            f"gpu {gpu}: pass lines were buffered (one every {spacing_s * 1e3:.3g} ms, but the last arrived"
            f" {(times[-1] - started_at) * 1e3:.4g} ms after the start: {pass_s * 1e3:.3g} ms per pass)"
        )
    if margin < policy.min_margin:
        reasons.append(
            f"gpu {gpu}: {pass_s * 1e3:.3g} ms per pass is only {margin:.3g}x below regenerating A ({regen * 1e3:.3g} ms)"
        )
    if policy.host_stream_gbs and gbs < policy.host_stream_gbs:
        reasons.append(f"gpu {gpu}: {gbs:.3g} GB/s is no faster than streaming A from host memory")
    if ratio is not None and ratio < policy.min_bandwidth_fraction:
        reasons.append(f"gpu {gpu}: {gbs:.3g} GB/s is {ratio:.2f} of the expected {expected_gbs:.4g} GB/s")
    ok = not reasons
    return GpuMemoryResult(
        ok,
        reasons,
        None if ok else "time",
        pass_s=pass_s,
        gbs=gbs,
        regen_bound_s=regen,
        margin=margin,
        bandwidth_ratio=ratio,
    )


def judge_memory_timing(
    challenge: MemoryChallenge,
    started_at: float,
    arrivals: list[list[float]],
    policy: MemoryPolicy | None = None,
    expected_gbs: float | None = None,
) -> MemoryVerdict:
    """The time judge over the validator's clock: ``started_at`` when it sent the start nonce
    (``memory_commit``, after A was built), ``arrivals`` of each GPU's pass lines. Never raises."""
    policy = policy or MemoryPolicy()
    try:
        if len(arrivals) != challenge.gpu_count:
            return MemoryVerdict(
                False, [f"arrivals for {len(arrivals)} GPUs, expected {challenge.gpu_count}"], "time"
            )
        started_at = float(started_at)
        if not math.isfinite(started_at):
            return MemoryVerdict(False, ["start time is not finite"], "time")
        per_gpu = [
            _judge_gpu(challenge, g, started_at, list(map(float, times)), policy, expected_gbs)
            for g, times in enumerate(arrivals)
        ]
        ok = all(result.ok for result in per_gpu)
        return MemoryVerdict(
            ok, [r for result in per_gpu for r in result.reasons], None if ok else "time", per_gpu
        )
    except Exception as exc:  # the verdict boundary
        log.warning("memory timing failed on malformed input: %s", exc, exc_info=True)
        return MemoryVerdict(False, [f"malformed timing input: {type(exc).__name__}: {exc}"], "time")


def memory_hint_gb(claimed_gb: float, maths: MemoryVerdict, timing: MemoryVerdict) -> float | None:
    """Memory figure for ``identify``: the claimed size when both judges passed (A, sized to a
    fraction of it, was proven resident), else None (no memory evidence)."""
    return claimed_gb if maths.ok and timing.ok else None
