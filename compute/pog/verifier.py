"""Verify a Proof-of-GPU opening: Merkle paths against the roots, sampled entries against float64.

For each GPU the verifier regenerates only what it needs: the column values of A and the row
values of B along n (shared by all samples of that GPU), then each opened row i of A and each
requested column j of B (O(n) each), and compares ``sum_t A[i,t] B[t,j]`` computed exactly in
float64 with the committed fp32 entries.

Tolerance (``tolerance(precision, n, chunk)``, ``tolerance.py``): from an error model of honest
fp32 accumulation slab by slab, placed at the geometric mean of the honest bound and the closest
shortcut (fp16 accumulation with promotion, cheaper input formats); docs/pog.md states the model.

The recomputation is ``recompute.py``'s (numba when installed, numpy otherwise; the same bits),
or entries the caller computed beforehand from its own challenge and request (``expected=``, e.g.
in a process pool: ``verify_pool``). ``verify`` never raises: every problem becomes a reason in
the ``Verdict``. It does not choose the challenge or the openings (see ``challenge.py``) and does not time anything.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
from dataclasses import dataclass, field

import numpy as np

from .merkle import leaf_hash, root_from_path
from .recompute import expected_entries
from .tolerance import tolerance

log = logging.getLogger(__name__)


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
    challenge, gpu: int, root_hex: str, rows: list[int], cols: list[list[int]], opening, expected=None
) -> GpuVerdict:
    tol = tolerance(challenge.precision, challenge.n, challenge.chunk)
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
    if expected is None:
        expected = expected_entries(challenge, gpu, rows, cols)
    errors = np.abs(np.concatenate(values) - expected)
    max_err = float(errors.max())
    if max_err > tol:
        bad = int((errors > tol).sum())
        reason = (
            f"gpu {gpu}: {bad}/{errors.size} sampled entries off by up to {max_err:.3g} (tolerance {tol:.3g})"
        )
        return GpuVerdict(False, [reason], max_err=max_err, tol=tol)
    return GpuVerdict(True, [], max_err=max_err, tol=tol)


def _verify(challenge, commitment, request, opening, expected) -> Verdict:
    ids = {challenge.challenge_id, commitment.challenge_id, request.challenge_id, opening.challenge_id}
    if len(ids) != 1:
        return Verdict(False, ["challenge ids of challenge, commitment, request and opening differ"])
    count = challenge.gpu_count
    sizes = (len(commitment.roots), len(request.rows), len(request.cols), len(opening.per_gpu))
    if any(size != count for size in sizes):
        return Verdict(False, [f"expected {count} GPUs, got roots/rows/cols/openings {sizes}"])
    if expected is not None and len(expected) != count:
        return Verdict(False, [f"expected entries for {len(expected)} GPUs, challenge has {count}"])
    per_gpu = [
        _verify_gpu(
            challenge,
            g,
            commitment.roots[g],
            request.rows[g],
            request.cols[g],
            opening.per_gpu[g],
            None if expected is None else expected[g],
        )
        for g in range(count)
    ]
    reasons = [reason for verdict in per_gpu for reason in verdict.reasons]
    return Verdict(all(v.ok for v in per_gpu), reasons, per_gpu)


def verify(challenge, commitment, request, opening, expected=None) -> Verdict:
    """Check an opening against the commitment and exact recomputation. Never raises.

    ``expected``: per GPU, ``recompute.expected_entries`` of (challenge, request) computed beforehand
    (None: computed here).
    """
    try:
        return _verify(challenge, commitment, request, opening, expected)
    except Exception as exc:  # the verdict boundary: malformed input must never escape as an exception
        log.warning("pog verification failed on malformed input: %s", exc, exc_info=True)
        return Verdict(False, [f"malformed input: {type(exc).__name__}: {exc}"])
