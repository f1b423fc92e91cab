"""Memory proof v2, the two judges: exact mathematics on opened passes, and time on the validator's clock.

- mathematics (``verify_memory``): opened vectors hash to the committed leaves, pass 1 starts from
  the keyed ``x_0``, and sampled entries satisfy ``y_r[i] = A[i, :] . x_{r-1} mod 2^32`` EXACTLY
  (no tolerance: a lossy, truncated or partly regenerated copy of A gives other words). The validator
  regenerates a few secret rows of A (O(n x hash_rounds) each, ``rows_kernel``: numba or numpy, shared
  by the opened passes)
  and recomputes ``x_{r-1}`` from the opened ``y_{r-1}``, the keyed offsets and the lockstep word of
  all GPUs' committed pass-(r-1) leaves.
- time (``judge_memory_timing``): the chain starts from a nonce sent only after A is built, so
  (last arrival - start sent) / passes is a sound upper bound of the per-pass time. It must be
  ``min_margin`` x below regenerating A at ``max_regen_rate`` and imply more than host streaming;
  lines spaced faster than any device reads A were buffered and are rejected.

Both never raise. ``proven_bytes`` is what a GPU gets credited: A's size when both judges passed.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import secrets
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..draws import MEMORY_ROWS, oracle_rng
from .kernel import lockstep_word, next_x, pass_leaf, pass_offsets, round_keys, start_vector
from .rows_kernel import element_rows
from .wire import MemoryChallenge, MemoryCommitment, MemoryOpening, MemoryOpenRequest, MemoryPolicy, VectorB64

log = logging.getLogger(__name__)
Judge = Literal["mathematics", "time"]


@dataclass(frozen=True)
class GpuMemoryResult:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    caught_by: Judge | None = None
    wrong_entries: int = 0
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


def expected_rows(challenge: MemoryChallenge, gpu: int, rows: list[int]) -> np.ndarray:
    """uint32 rows of one GPU's A (O(n x hash_rounds) each; numba when installed, else numpy)."""
    keys = round_keys(bytes.fromhex(challenge.key), gpu, challenge.hash_rounds)
    return element_rows(np.asarray(rows, dtype=np.uint32), challenge.n, keys)


def proven_bytes(challenge: MemoryChallenge, maths: MemoryVerdict, timing: MemoryVerdict) -> list[int]:
    """Per GPU: A's bytes when both judges passed for it, else 0 (nothing else is ever credited)."""
    out = []
    for g in range(challenge.gpu_count):
        ok = maths.ok and len(timing.per_gpu) == challenge.gpu_count and timing.per_gpu[g].ok
        out.append(challenge.matrix_bytes if ok else 0)
    return out


def _decode(vector: VectorB64, n: int) -> np.ndarray:
    if list(vector.shape) != [n]:
        raise ValueError(f"vector shape {vector.shape} != [{n}]")
    raw = base64.b64decode(vector.data, validate=True)
    if len(raw) != 4 * n:
        raise ValueError(f"vector has {len(raw)} bytes, expected {4 * n}")
    return np.frombuffer(raw, dtype="<u4").astype(np.uint32)


def _opened(challenge, gpu, leaves, wanted, opening) -> dict[int, np.ndarray] | str:
    """The opened vectors by pass, checked against the committed leaves; a reason string if not."""
    needed = sorted({r for p in wanted for r in (p, p - 1)} - {0})
    if list(opening.indices) != needed or len(opening.vectors) != len(needed):
        return f"opened passes {list(opening.indices)} != needed {needed}"
    cid, vectors = bytes.fromhex(challenge.challenge_id), {}
    for r, vector in zip(opening.indices, opening.vectors, strict=True):
        try:
            values = _decode(vector, challenge.n)
        except (ValueError, binascii.Error) as exc:
            return f"pass {r}: {exc}"
        if pass_leaf(cid, gpu, r, values).hex() != leaves[gpu][r - 1]:
            return f"pass {r}: vector does not match the committed leaf"
        vectors[r] = values
    return vectors


def _verify_gpu(challenge, gpu, leaves, wanted, opening, rows) -> GpuMemoryResult:
    fail = lambda reason: GpuMemoryResult(False, [f"gpu {gpu}: {reason}"], "mathematics")  # noqa: E731
    vectors = _opened(challenge, gpu, leaves, wanted, opening)
    if isinstance(vectors, str):
        return fail(vectors)
    key, start = bytes.fromhex(challenge.key), bytes.fromhex(challenge.start)
    a_rows = expected_rows(challenge, gpu, rows)
    bad, wrong = [], 0
    for r in wanted:
        if r == 1:
            x = start_vector(key, start, gpu, challenge.n)
        else:
            word = lockstep_word([leaves[g][r - 2] for g in range(challenge.gpu_count)])
            x = next_x(vectors[r - 1], pass_offsets(key, start, gpu, r - 1, challenge.n), word)
        misses = int(np.count_nonzero(vectors[r][rows] != a_rows @ x))  # uint32 matmul wraps mod 2^32
        if misses:
            bad.append(r)
            wrong += misses
    if bad:
        return GpuMemoryResult(
            False,
            [f"gpu {gpu}: passes {bad} wrong in {wrong} sampled entries (exact check)"],
            "mathematics",
            wrong,
        )
    return GpuMemoryResult(True)


def check_rows(
    challenge: MemoryChallenge, rows_per_gpu: int = 8, rng: np.random.Generator | None = None
) -> list[list[int]]:
    """The secret rows of A checked per GPU (drawn by the validator: secrets unless ``rng``)."""
    rng = (
        rng or oracle_rng(MEMORY_ROWS, challenge.challenge_id) or np.random.default_rng(secrets.randbits(64))
    )
    count = min(rows_per_gpu, challenge.n)
    return [
        sorted(int(i) for i in rng.choice(challenge.n, count, replace=False))
        for _ in range(challenge.gpu_count)
    ]


def verify_memory(
    challenge: MemoryChallenge,
    commitment: MemoryCommitment,
    request: MemoryOpenRequest,
    opening: MemoryOpening,
    rows_per_gpu: int = 8,
    rng: np.random.Generator | None = None,
    rows: list[list[int]] | None = None,
) -> MemoryVerdict:
    """The mathematics judge: leaves, then sampled entries of every opened pass. Never raises.

    ``rows``: the checked rows per GPU drawn beforehand (``check_rows``; e.g. in the validator's
    process when this runs in a worker process); drawn here otherwise."""
    try:
        ids = {challenge.challenge_id, commitment.challenge_id, request.challenge_id, opening.challenge_id}
        if len(ids) != 1:
            return MemoryVerdict(False, ["challenge ids differ"], "mathematics")
        sizes = (len(commitment.leaves), len(request.passes), len(opening.per_gpu))
        if any(size != challenge.gpu_count for size in sizes):
            return MemoryVerdict(False, [f"expected {challenge.gpu_count} GPUs, got {sizes}"], "mathematics")
        if any(len(leaves) != challenge.passes for leaves in commitment.leaves):
            return MemoryVerdict(False, [f"expected {challenge.passes} leaves per GPU"], "mathematics")
        if rows is None:
            rows = check_rows(challenge, rows_per_gpu, rng)
        if len(rows) != challenge.gpu_count:
            return MemoryVerdict(False, [f"checked rows for {len(rows)} GPUs"], "mathematics")
        per_gpu = [
            _verify_gpu(challenge, g, commitment.leaves, request.passes[g], opening.per_gpu[g], rows[g])
            for g in range(challenge.gpu_count)
        ]
        ok = all(result.ok for result in per_gpu)
        reasons = [reason for result in per_gpu for reason in result.reasons]
        return MemoryVerdict(ok, reasons, None if ok else "mathematics", per_gpu)
    except Exception as exc:  # the verdict boundary: malformed input never escapes
        log.warning("memory verification failed on malformed input: %s", exc, exc_info=True)
        return MemoryVerdict(False, [f"malformed input: {type(exc).__name__}: {exc}"], "mathematics")


def _buffered(times: list[float], started_at: float, passes: int, bytes_: int, policy, expected_gbs) -> bool:
    pass_s = (times[-1] - started_at) / passes
    spacing_s = (times[-1] - times[0]) / (passes - 1)
    ceiling = expected_gbs * policy.max_bandwidth_factor if expected_gbs else policy.max_device_gbs
    too_fast = bool(ceiling) and bytes_ / max(spacing_s, 1e-12) / 1e9 > ceiling
    lead_s = times[0] - started_at - spacing_s  # honest: about one round trip
    held = (
        bool(policy.max_bunching) and spacing_s * policy.max_bunching < pass_s and lead_s > policy.max_lead_s
    )
    return too_fast or held


def _judge_gpu(challenge, gpu, started_at, times, policy, expected_gbs) -> GpuMemoryResult:
    fail = lambda reason: GpuMemoryResult(False, [f"gpu {gpu}: {reason}"], "time")  # noqa: E731
    if len(times) != challenge.passes or any(not math.isfinite(t) for t in times) or sorted(times) != times:
        return fail(f"{len(times)} ordered pass arrivals for {challenge.passes} passes")
    if times[0] <= started_at:
        return fail("a pass line arrived before the start was sent")
    # Sound: the chain cannot begin before the start nonce was sent, and passes are sequential.
    pass_s = (times[-1] - started_at) / challenge.passes
    gbs = challenge.matrix_bytes / pass_s / 1e9
    regen = challenge.n**2 * challenge.hash_rounds / policy.max_regen_rate
    margin = regen / pass_s
    ratio = gbs / expected_gbs if expected_gbs else None
    reasons = []
    if _buffered(times, started_at, challenge.passes, challenge.matrix_bytes, policy, expected_gbs):
        reasons.append(
            f"gpu {gpu}: pass lines were buffered (the last arrived {(times[-1] - started_at) * 1e3:.4g} ms"
            f" after the start: {pass_s * 1e3:.3g} ms per pass, but they came bunched)"
        )
    if margin < policy.min_margin:
        reasons.append(
            f"gpu {gpu}: {pass_s * 1e3:.3g} ms per pass is only {margin:.3g}x below regenerating A"
            f" ({regen * 1e3:.3g} ms)"
        )
    if policy.host_stream_gbs and gbs < policy.host_stream_gbs:
        reasons.append(f"gpu {gpu}: {gbs:.3g} GB/s is no faster than streaming A from host memory")
    if ratio is not None and ratio < policy.min_bandwidth_fraction:
        reasons.append(f"gpu {gpu}: {gbs:.3g} GB/s is {ratio:.2f} of the expected {expected_gbs:.4g} GB/s")
    ok = not reasons
    return GpuMemoryResult(
        ok, reasons, None if ok else "time", 0, pass_s, gbs, regen, margin, bandwidth_ratio=ratio
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
