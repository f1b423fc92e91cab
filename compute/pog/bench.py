"""Benchmark of the PoG engine: prover overhead over a plain GEMM, and verification cost.

``run_bench`` times, in one process on one device: a plain product of pre-generated full A and B
(``gemm_s``), the full prover commit (generation + chunked GEMM + hashing, ``commit_s``) and the
verification of the default opening. ``verify_at_n`` times verification of a synthetic honest
opening at a large n (e.g. 2**20) without computing the full product: only the sampled rows are
computed, exactly, so the cost measured is the verifier's. Figures are advisory; no I/O here.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from .challenge import choose_openings, new_challenge
from .generator import (
    MATRIX_A,
    MATRIX_B,
    PRECISION_BITS,
    index_values,
    matrix_block_np,
    matrix_seeds,
    mix_vector_f64,
    subkey,
)
from .merkle import MerkleTree, leaf_hash
from .prover import Prover
from .verifier import verify
from .wire import B64Array, Commitment, GpuOpening, Opening, Precision, RowProof


@dataclass(frozen=True)
class BenchResult:
    device: str
    precision: str
    m: int
    n: int
    p: int
    gemm_s: float
    commit_s: float
    overhead_ratio: float
    tflops: float
    verify_s: float
    verified_entries: int
    verify_s_per_entry: float
    verify_n: int | None = None
    verify_n_s: float | None = None
    repeats: int = 1

    def as_dict(self) -> dict:
        return asdict(self)


def _plain_gemm(challenge, device: str):
    """A zero-argument callable running the plain product of pre-generated full A and B."""
    bits = PRECISION_BITS[challenge.precision]
    key = subkey(bytes.fromhex(challenge.key), 0)
    a = matrix_block_np(key, MATRIX_A, bits, (0, challenge.m), (0, challenge.n))
    b = matrix_block_np(key, MATRIX_B, bits, (0, challenge.n), (0, challenge.p))
    try:
        import torch
    except ImportError:
        return lambda: np.matmul(a, b)
    if device == "cuda":
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[challenge.precision]
        at, bt = torch.from_numpy(a).cuda().to(dtype), torch.from_numpy(b).cuda().to(dtype)

        def run_cuda() -> None:
            torch.mm(at, bt)
            torch.cuda.synchronize()

        return run_cuda
    at, bt = torch.from_numpy(a).clone(), torch.from_numpy(b).clone()  # torch's 64-byte alignment
    return lambda: torch.mm(at, bt)


def _timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def verify_at_n(
    precision: Precision, n: int, m: int = 4096, p: int = 4096, rows: int = 8, cols: int = 4
) -> float:
    """Seconds to verify one GPU's default opening at inner size ``n`` (synthetic honest rows)."""
    challenge = new_challenge(precision, m, n, p, 1)
    request = choose_openings(challenge, rows, cols)
    bits = PRECISION_BITS[precision]
    key = subkey(bytes.fromhex(challenge.key), 0)
    (a_rs, a_cs), (b_rs, b_cs) = matrix_seeds(key, MATRIX_A), matrix_seeds(key, MATRIX_B)
    row_vals, col_vals = index_values(a_rs, 0, m), index_values(b_cs, 0, p)
    b_rows, a_cols = index_values(b_rs, 0, n), index_values(a_cs, 0, n)
    # honest rows for the sampled indices only: A[i] @ B, with B built one column block at a time
    c_rows = np.zeros((rows, p), dtype=np.float64)
    a_sel = np.stack([mix_vector_f64(int(row_vals[i]), a_cols, bits) for i in request.rows[0]])
    for j in request.cols[0]:
        c_rows[:, j] = a_sel @ mix_vector_f64(int(col_vals[j]), b_rows, bits)
    c_rows = c_rows.astype(np.float32)
    cid = bytes.fromhex(challenge.challenge_id)
    leaves = [leaf_hash(cid, 0, i, np.zeros(p, np.float32)) for i in range(m)]
    for k, i in enumerate(request.rows[0]):
        leaves[i] = leaf_hash(cid, 0, i, c_rows[k])
    tree = MerkleTree(leaves)
    proofs = [
        RowProof(index=i, row=B64Array.from_numpy(c_rows[k]), path=[h.hex() for h in tree.path(i)])
        for k, i in enumerate(request.rows[0])
    ]
    opening = Opening(challenge_id=challenge.challenge_id, per_gpu=[GpuOpening(rows=proofs)])
    commitment = Commitment(challenge_id=challenge.challenge_id, roots=[tree.root.hex()])
    started = time.perf_counter()
    verdict = verify(challenge, commitment, request, opening)
    elapsed = time.perf_counter() - started
    if not verdict.ok:
        raise RuntimeError(f"synthetic honest opening failed verification: {verdict.reasons}")
    return elapsed


def run_bench(
    device: str = "auto",
    precision: Precision = "fp32",
    m: int = 4096,
    n: int = 4096,
    p: int = 4096,
    verify_n: int | None = None,
    repeats: int = 5,
) -> BenchResult:
    """Best of ``repeats`` interleaved runs of the plain GEMM and the full commit, after a warm-up.

    Interleaving exposes both to the same background load; the minimum is the least disturbed run.
    """
    prover = Prover(device)
    challenge = new_challenge(precision, m, n, p, 1)
    gemm = _plain_gemm(challenge, prover.device)
    gemm()  # warm-up: thread pools, allocator, (CUDA) kernels
    prover.commit(new_challenge(precision, min(m, 256), min(n, 256), min(p, 256), 1))
    gemm_times, commit_times = [], []
    for _ in range(max(1, repeats)):
        gemm_times.append(_timed(gemm)[0])
        elapsed, commitment = _timed(lambda: prover.commit(challenge))
        commit_times.append(elapsed)
    gemm_s, commit_s = min(gemm_times), min(commit_times)
    request = choose_openings(challenge)
    opening = prover.open(request)
    started = time.perf_counter()
    verdict = verify(challenge, commitment, request, opening)
    verify_s = time.perf_counter() - started
    if not verdict.ok:
        raise RuntimeError(f"honest benchmark round failed verification: {verdict.reasons}")
    entries = sum(len(r) * len(c) for r, c in zip(request.rows, request.cols, strict=True))
    return BenchResult(
        device=prover.device,
        precision=precision,
        m=m,
        n=n,
        p=p,
        gemm_s=gemm_s,
        commit_s=commit_s,
        overhead_ratio=commit_s / gemm_s,
        tflops=2.0 * m * n * p / commit_s / 1e12,
        verify_s=verify_s,
        verified_entries=entries,
        verify_s_per_entry=verify_s / entries,
        verify_n=verify_n,
        verify_n_s=None if verify_n is None else verify_at_n(precision, verify_n),
        repeats=max(1, repeats),
    )
