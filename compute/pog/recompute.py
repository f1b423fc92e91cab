"""Exact recomputation of a GEMM opening's sampled entries: numpy (reference and fallback) or numba.

For one GPU's sub-challenge the validator regenerates only what it needs: the column values of A and
the row values of B along n (shared by all samples of that GPU), each opened row i of A and, per
(row, column) pair, column j of B, and sums ``A[i, t] * B[t, j]`` over t. Every element is a centred
integer (``k - 2**(bits-1)``) times ``2**-(bits-1)``, so the sum is an integer times a power of two:
the result here is that integer, correctly rounded to float64, times the scale. It is unique (no
summation order to agree on), which is what makes the backends bit-identical:
- fp16/bf16: products < 2**21, sums < 2**47 at any allowed n (<= 2**26): float64 holds every
  partial sum exactly, so the numpy path's float64 ``vecdot`` is exact in any order;
- fp32: products reach 2**46 and sums pass 2**53, so the numpy path sums int64 products per block
  (< 2**63) and carries them in two int64 words (high and low 32 bits), the numba kernel likewise.

``expected_entries`` picks the compiled kernel (``verify_kernel``) when numba is installed and the
work is large enough to pay for it, numpy otherwise; ``backend=`` forces one (tests, benchmarks).
The inputs are the validator's own challenge and opening request: nothing here reads miner data,
checks a Merkle path or times anything (``verifier.py`` does the checks).
"""

from __future__ import annotations

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
    scaled,
    subkey,
    values_at,
)
from .verify_kernel import entries_numba, kernel_available

BACKENDS = ("auto", "numba", "numpy")
# Generated elements per verification step, (rows + row x column pairs) x block: two uint32 buffers
# of 512 KB and one float64 buffer of 1 MB -- memory independent of n, time linear in n. numpy's
# passes are bound by cache bandwidth plus ~1 us per call: 2**17 elements per pass is the measured
# optimum (2**18 and more spill to L3 and run up to 2x slower per element).
VERIFY_ELEMENTS = 1 << 17
VERIFY_BLOCK = 8192  # block along n at the default opening (8 rows x 1 column: 16 vectors)
# Index values of A's columns and B's rows are computed this many elements at a time (10 passes over
# 2 vectors: per-call overhead dominates at one block).
INDEX_CHUNK = 1 << 16
# Below this many generated elements ((rows + pairs) x n) numpy is used even with numba installed:
# ~6 ms of numpy, less than loading the compiled kernel (the demo and unit tests never import numba).
NUMBA_MIN_ELEMENTS = 1 << 22
_LOW32 = (1 << 32) - 1


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


def _pair_dots(out: np.ndarray, rows: int, pair_rows: list[int] | None) -> np.ndarray:
    """Each (row, own column) pair's dot product over one block, in generation order."""
    if pair_rows is None:  # slot-major: every slab of ``rows`` columns pairs with the rows in order
        return np.concatenate(
            [np.vecdot(out[:rows], out[s0 : s0 + rows]) for s0 in range(rows, out.shape[0], rows)]
        )
    return np.array([np.dot(out[r], out[rows + q]) for q, r in enumerate(pair_rows)], dtype=out.dtype)


class _Sums:
    """Exact running sums of the pairs' integer dot products (float64 below 2**53, else two int64 words)."""

    def __init__(self, pairs: int, wide: bool) -> None:
        self.wide = wide
        self.acc = np.zeros(pairs, np.float64)
        self.high = np.zeros(pairs, np.int64)
        self.low = np.zeros(pairs, np.int64)

    def add(self, block_sums: np.ndarray) -> None:
        if not self.wide:
            self.acc += block_sums  # exact: every partial sum is an integer below 2**53
            return
        self.high += block_sums >> 32  # block sums are int64 (< 2**63): split, never overflow
        self.low += block_sums & _LOW32

    def integers(self) -> list[int]:
        if not self.wide:
            return [int(v) for v in self.acc]
        return [(int(h) << 32) + int(lo) for h, lo in zip(self.high, self.low, strict=True)]


def _centred_ints(out_f64: np.ndarray, out_i64: np.ndarray) -> np.ndarray:
    """The block's centred integers as int64 (fp32: products need 46 bits, exact only in integers)."""
    np.copyto(out_i64, out_f64, casting="unsafe")  # integers below 2**23: exact
    return out_i64


def entries_numpy(challenge, gpu: int, rows: list[int], cols: list[list[int]]) -> np.ndarray:
    """``expected_entries`` in numpy, blocked along n (memory O(block), time O((rows + pairs) x n))."""
    bits = PRECISION_BITS[challenge.precision]
    key = subkey(bytes.fromhex(challenge.key), gpu)
    (a_rs, a_cs), (b_rs, b_cs) = matrix_seeds(key, MATRIX_A), matrix_seeds(key, MATRIX_B)
    pair_cols, order = _pair_layout(cols)
    pair_rows = None if order is not None else [k for k, row_cols in enumerate(cols) for _ in row_cols]
    fixed = (values_at(a_rs, np.asarray(rows)), values_at(b_cs, np.asarray(pair_cols)))
    wide = bits > 16
    # int64 block sums of fp32 products (< 2**46 each) stay below 2**63 for blocks <= 2**16
    block = min(verify_block(len(rows) + len(pair_cols)), challenge.n, 1 << 16)
    z = np.empty((len(rows) + len(pair_cols), block), np.uint32)
    tmp, centred = np.empty_like(z), np.empty(z.shape, np.float64)
    ints = np.empty(z.shape, np.int64) if wide else None
    sums = _Sums(len(pair_cols), wide)
    with np.errstate(over="ignore"):
        for a_vals, b_vals in _index_chunks((a_cs, b_rs), challenge.n, block * max(1, INDEX_CHUNK // block)):
            for b0 in range(0, len(a_vals), block):
                size = min(block, len(a_vals) - b0)
                vals = (a_vals[b0 : b0 + size], b_vals[b0 : b0 + size])
                out = centered_block(fixed, vals, bits, z[:, :size], tmp[:, :size], centred[:, :size])
                if ints is not None:
                    out = _centred_ints(out, ints[:, :size])
                sums.add(_pair_dots(out, len(rows), pair_rows))
    exact = sums.integers()
    if order is not None:
        exact = [exact[i] for i in order]
    return scaled(exact, bits)


def resolve_backend(backend: str, elements: int) -> str:
    """ "numba" or "numpy" for a recomputation of ``elements`` generated elements."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "numpy":
        return "numpy"
    if backend == "numba":
        if not kernel_available():
            raise RuntimeError("the compiled verifier needs numba (pip install numba)")
        return "numba"
    return "numba" if elements >= NUMBA_MIN_ELEMENTS and kernel_available() else "numpy"


def expected_entries(
    challenge, gpu: int, rows: list[int], cols: list[list[int]], backend: str = "auto"
) -> np.ndarray:
    """Exact ``C[rows[k], cols[k][c]]`` of one GPU's sub-challenge, flat float64 in (row, column) order.

    Element values are ``generator.centered_block``'s: the same definition as the provers' numpy,
    torch, numba and Triton generators. ``backend``: "auto" (numba for large work when installed),
    "numba" or "numpy"; all give the same bits.
    """
    pairs = sum(len(c) for c in cols)
    if resolve_backend(backend, (len(rows) + pairs) * challenge.n) == "numba":
        return entries_numba(challenge, gpu, rows, cols)
    return entries_numpy(challenge, gpu, rows, cols)


def expected_for(challenge, request, backend: str = "auto") -> list[np.ndarray]:
    """``expected_entries`` of every GPU of ``request`` (the validator's own challenge and openings)."""
    return [
        expected_entries(challenge, g, request.rows[g], request.cols[g], backend)
        for g in range(challenge.gpu_count)
    ]
