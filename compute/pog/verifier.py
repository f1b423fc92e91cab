"""Verify a Proof-of-GPU opening: Merkle paths against the roots, sampled entries against float64.

For each GPU the verifier regenerates only what it needs: the column values of A and the row
values of B along n (shared by all samples of that GPU), then each opened row i of A and each
requested column j of B (O(n) each), and compares ``sum_t A[i,t] B[t,j]`` computed exactly in
float64 with the committed fp32 entries.

Tolerance (``tolerance(precision, n)``): the geometric mean of
- an honest bound ``H = 2**-24 * n / 2`` — twice the largest error measured for the worst honest
  order (one sequential fp32 sum over n terms); chunked/blocked GEMMs are 5-10x below it, and
- the error of the nearest cheaper format, ``S = delta * sqrt(n) / 3`` (sqrt(n)/3 is the spread of
  an entry), with delta measured: bf16 inputs on an fp16 challenge 2.2e-3, TF32 inputs on an fp32
  challenge 2.6e-4, fp8-e4m3 inputs on a bf16 challenge 3.3e-2.
so both margins are equal: sqrt(S/H), >= 1.7x at n = 2**20 for fp32 and wider below that; a
cheat must also land all 32 sampled entries under it.

Numpy only; ``verify`` never raises: every problem becomes a reason in the ``Verdict``. It does not
choose the challenge or the openings (see ``challenge.py``) and does not time anything.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
from dataclasses import dataclass, field

import numpy as np

from .generator import (
    GOLDEN,
    MATRIX_A,
    MATRIX_B,
    PRECISION_BITS,
    centered_block,
    counter_offset,
    fmix32_into,
    matrix_seeds,
    subkey,
    values_at,
)
from .merkle import leaf_hash, root_from_path

log = logging.getLogger(__name__)

CHEAT_DELTA = {"fp16": 2.2e-3, "fp32": 2.6e-4, "bf16": 3.3e-2}


@dataclass(frozen=True)
class GpuVerdict:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    max_err: float = math.inf
    tol: float = 0.0


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    per_gpu: list[GpuVerdict] = field(default_factory=list)


def tolerance(precision: str, n: int) -> float:
    """Largest accepted |committed - exact| for one entry of a challenge of inner size n."""
    honest = 2.0**-24 * n / 2
    cheat = CHEAT_DELTA[precision] * math.sqrt(n) / 3
    return math.sqrt(honest * cheat)


# Generated elements per verification step, (rows + row x column pairs) x block: two uint32 buffers
# of 512 KB and one float64 buffer of 1 MB -- memory independent of n, time linear in n. numpy's
# passes are bound by cache bandwidth plus ~1 us per call: 2**17 elements per pass is the measured
# optimum (2**18 and more spill to L3 and run up to 2x slower per element).
VERIFY_ELEMENTS = 1 << 17
VERIFY_BLOCK = 8192  # block along n at the default opening (8 rows x 1 column: 16 vectors)
# Index values of A's columns and B's rows are computed this many elements at a time (10 passes over
# 2 vectors: per-call overhead dominates at one block).
INDEX_CHUNK = 1 << 16


def verify_block(vectors: int) -> int:
    """Block along n for ``vectors`` generated vectors: ~VERIFY_ELEMENTS per pass, a multiple of 1024."""
    return max(1024, VERIFY_ELEMENTS // max(1, vectors) // 1024 * 1024)


def _index_into(
    seed: int, start: int, golden_steps: np.ndarray, out: np.ndarray, tmp: np.ndarray
) -> np.ndarray:
    """``index_values(seed, start, len(golden_steps))`` into ``out``; ``golden_steps`` is ``i * GOLDEN``.

    ``(start + i) * GOLDEN + seed == i * GOLDEN + (start * GOLDEN + seed)`` mod 2**32: one pass
    instead of three for the counter.
    """
    with np.errstate(over="ignore"):
        np.add(golden_steps, np.uint32(counter_offset(seed, start)), out=out)
        return fmix32_into(out, tmp)


def _index_chunks(seeds: tuple[int, int], n: int, chunk: int):
    """Yield ``(A column values, B row values)`` along n, ``chunk`` at a time, in reused buffers."""
    with np.errstate(over="ignore"):
        golden_steps = np.arange(chunk, dtype=np.uint32) * np.uint32(GOLDEN)
    buf = np.empty((3, chunk), np.uint32)
    for c0 in range(0, n, chunk):
        size = min(chunk, n - c0)
        a_vals, b_vals, tmp = buf[:, :size]
        yield (
            _index_into(seeds[0], c0, golden_steps[:size], a_vals, tmp),
            _index_into(seeds[1], c0, golden_steps[:size], b_vals, tmp),
        )


def _pair_layout(cols: list[list[int]]) -> tuple[list[int], list[int] | None]:
    """Checked columns in generation order, and the order that restores (row, column) order.

    When every row has ``c`` columns they are laid out slot-major (slot ``s`` of every row is one
    contiguous ``[rows, block]`` slab, so one ``vecdot`` covers it: no power-of-two strides); the
    second item is then the permutation back. Otherwise pairs stay in (row, column) order (None).
    """
    counts = {len(row_cols) for row_cols in cols}
    if len(counts) != 1 or getattr(np, "vecdot", None) is None:  # numpy < 2.0 has no vecdot
        return [j for row_cols in cols for j in row_cols], None
    c, rows = counts.pop(), len(cols)
    order = [s * rows + k for k in range(rows) for s in range(c)]
    return [cols[k][s] for s in range(c) for k in range(rows)], order


def _accumulate(acc: np.ndarray, out: np.ndarray, rows: int, pair_rows: list[int] | None) -> None:
    """Add each (row, own column) pair's dot product over one block to ``acc`` (generation order)."""
    if pair_rows is None:  # slot-major: every slab of ``rows`` columns pairs with the rows in order
        for s0 in range(rows, out.shape[0], rows):
            acc[s0 - rows : s0] += np.vecdot(out[:rows], out[s0 : s0 + rows])
        return
    for q, r in enumerate(pair_rows):
        acc[q] += np.dot(out[r], out[rows + q])


def expected_entries(challenge, gpu: int, rows: list[int], cols: list[list[int]]) -> np.ndarray:
    """Exact ``C[rows[k], cols[k][c]]`` of one GPU's sub-challenge, flat float64 in (row, column) order.

    Blocked along n: per block it generates the opened rows of A and, for every (row, column) pair,
    that column of B as centred integers, and adds each pair's dot product, so memory is O(block)
    and time O((rows + pairs) * n). Element values are ``generator.centered_block``'s: the same
    definition as the provers' numpy, torch and Triton generators.
    """
    bits = PRECISION_BITS[challenge.precision]
    key = subkey(bytes.fromhex(challenge.key), gpu)
    (a_rs, a_cs), (b_rs, b_cs) = matrix_seeds(key, MATRIX_A), matrix_seeds(key, MATRIX_B)
    pair_cols, order = _pair_layout(cols)
    pair_rows = None if order is not None else [k for k, row_cols in enumerate(cols) for _ in row_cols]
    fixed = (values_at(a_rs, np.asarray(rows)), values_at(b_cs, np.asarray(pair_cols)))
    block = min(verify_block(len(rows) + len(pair_cols)), challenge.n)
    z = np.empty((len(rows) + len(pair_cols), block), np.uint32)
    tmp, centred = np.empty_like(z), np.empty(z.shape, np.float64)
    acc = np.zeros(len(pair_cols), np.float64)
    with np.errstate(over="ignore"):
        for a_vals, b_vals in _index_chunks((a_cs, b_rs), challenge.n, block * max(1, INDEX_CHUNK // block)):
            for b0 in range(0, len(a_vals), block):
                size = min(block, len(a_vals) - b0)
                vals = (a_vals[b0 : b0 + size], b_vals[b0 : b0 + size])
                out = centered_block(fixed, vals, bits, z[:, :size], tmp[:, :size], centred[:, :size])
                _accumulate(acc, out, len(rows), pair_rows)
    exact = acc if order is None else acc[order]
    return exact * (2.0 ** -(bits - 1)) ** 2


def _decode_row(proof, p: int) -> tuple[np.ndarray, None] | tuple[None, str]:
    row = proof.row
    if row.dtype != "<f4" or list(row.shape) != [p]:
        return None, f"row {proof.index}: expected dtype <f4 shape [{p}], got {row.dtype} {list(row.shape)}"
    if len(row.data) != 4 * ((4 * p + 2) // 3):  # size checked before decoding anything
        return (
            None,
            f"row {proof.index}: {len(row.data)} base64 characters, expected {4 * ((4 * p + 2) // 3)}",
        )
    try:
        raw = base64.b64decode(row.data, validate=True)
    except (binascii.Error, ValueError):
        return None, f"row {proof.index}: invalid base64"
    if len(raw) != 4 * p:
        return None, f"row {proof.index}: {len(raw)} bytes, expected {4 * p}"
    values = np.frombuffer(raw, dtype="<f4")
    if not np.isfinite(values).all():
        return None, f"row {proof.index}: NaN or infinity"
    return values, None


def _verify_gpu(
    challenge, gpu: int, root_hex: str, rows: list[int], cols: list[list[int]], opening
) -> GpuVerdict:
    tol = tolerance(challenge.precision, challenge.n)
    proofs = list(opening.rows)
    if [proof.index for proof in proofs] != list(rows):
        return GpuVerdict(
            False, [f"gpu {gpu}: opened rows {[pr.index for pr in proofs]} != requested {rows}"], tol=tol
        )
    if len(cols) != len(rows) or not all(cols):
        return GpuVerdict(False, [f"gpu {gpu}: every opened row needs its own columns"], tol=tol)
    if any(not 0 <= j < challenge.p for c in cols for j in c) or any(not 0 <= i < challenge.m for i in rows):
        return GpuVerdict(False, [f"gpu {gpu}: requested index out of range"], tol=tol)
    root = bytes.fromhex(root_hex)
    challenge_id = bytes.fromhex(challenge.challenge_id)
    values: list[np.ndarray] = []
    for proof in proofs:
        row, problem = _decode_row(proof, challenge.p)
        if row is None:  # exactly when there is a problem
            return GpuVerdict(False, [f"gpu {gpu}: {problem}"], tol=tol)
        path = [bytes.fromhex(node) for node in proof.path]
        leaf = leaf_hash(challenge_id, gpu, proof.index, row)
        if root_from_path(leaf, proof.index, challenge.m, path) != root:
            return GpuVerdict(
                False, [f"gpu {gpu}: Merkle path of row {proof.index} does not match the root"], tol=tol
            )
        values.append(row[cols[len(values)]].astype(np.float64))
    errors = np.abs(np.concatenate(values) - expected_entries(challenge, gpu, rows, cols))
    max_err = float(errors.max())
    if max_err > tol:
        bad = int((errors > tol).sum())
        reason = (
            f"gpu {gpu}: {bad}/{errors.size} sampled entries off by up to {max_err:.3g} (tolerance {tol:.3g})"
        )
        return GpuVerdict(False, [reason], max_err=max_err, tol=tol)
    return GpuVerdict(True, [], max_err=max_err, tol=tol)


def _verify(challenge, commitment, request, opening) -> Verdict:
    ids = {challenge.challenge_id, commitment.challenge_id, request.challenge_id, opening.challenge_id}
    if len(ids) != 1:
        return Verdict(False, ["challenge ids of challenge, commitment, request and opening differ"])
    count = challenge.gpu_count
    sizes = (len(commitment.roots), len(request.rows), len(request.cols), len(opening.per_gpu))
    if any(size != count for size in sizes):
        return Verdict(False, [f"expected {count} GPUs, got roots/rows/cols/openings {sizes}"])
    per_gpu = [
        _verify_gpu(challenge, g, commitment.roots[g], request.rows[g], request.cols[g], opening.per_gpu[g])
        for g in range(count)
    ]
    reasons = [reason for verdict in per_gpu for reason in verdict.reasons]
    return Verdict(all(v.ok for v in per_gpu), reasons, per_gpu)


def verify(challenge, commitment, request, opening) -> Verdict:
    """Check an opening against the commitment and exact recomputation. Never raises."""
    try:
        return _verify(challenge, commitment, request, opening)
    except Exception as exc:  # the verdict boundary: malformed input must never escape as an exception
        log.warning("pog verification failed on malformed input: %s", exc, exc_info=True)
        return Verdict(False, [f"malformed input: {type(exc).__name__}: {exc}"])
