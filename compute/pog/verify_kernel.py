"""Compiled recomputation of a GEMM opening's sampled entries (numba): exact, the same bits as numpy.

``recompute.entries_numpy`` evaluates the generator in ~11 whole-array uint32 passes per element and
then a float64 ``vecdot``; this kernel does the same arithmetic per element in registers, blocked
along n (``KERNEL_BLOCK`` elements per step, everything in L1): per block the index values of A's
columns and B's rows, each opened row of A as centred int32, then per (row, column) pair the column
of B and the integer dot product, folded into two int64 words (high and low 32 bits). LLVM
vectorises every inner loop with AVX2 (eight 32-bit lanes, native multiplies); the precision's
shift is a compile-time constant (one kernel per precision: a runtime shift made numba widen the
loop to 64 bits, 2x slower).

Exact by construction, so the order of the sums is free and the result unique (``recompute``):
- fp16 / bf16: a product is below 2**20 in magnitude, a block of 1024 below 2**30: int32;
- fp32: a product reaches 2**46, a block 2**56: int64 (sign-extended 32-bit multiplies);
- block sums go into (sum >> 32, sum & 0xFFFFFFFF): at most 2**16 blocks (n <= 2**26), no overflow.

numba is optional: ``kernel_available()`` is False without it, when it fails to compile here, or
with ``COMPUTE_POG_VERIFIER=numpy``; ``recompute.expected_entries`` then uses numpy. Kernels are
compiled once per process and precision (``cache=True``: loaded from numba's on-disk cache after
the first compile, ~0.2 s instead of ~0.6 s). No Python objects inside, and the GIL is released
(``nogil``), so threads of one process run kernels side by side.
"""

from __future__ import annotations

import logging
import os
import threading

import numpy as np

from .generator import (
    GOLDEN,
    MATRIX_A,
    MATRIX_B,
    MIX1,
    MIX2,
    PRECISION_BITS,
    matrix_seeds,
    scaled,
    subkey,
    values_at,
)

log = logging.getLogger(__name__)

VERIFIER_ENV = "COMPUTE_POG_VERIFIER"  # "numpy": never use the compiled kernel
KERNEL_BLOCK = 1024  # <= 2047: an fp16 block sum of 2**20-products must fit int32

_M1, _M2 = np.uint32(MIX1), np.uint32(MIX2)
_S16, _S13 = np.uint32(16), np.uint32(13)
_UGOLDEN = np.uint32(GOLDEN)
_LOW32 = (1 << 32) - 1


def _make_kernel(bits: int):
    """The recomputation loop for one precision, as plain Python (numba compiles it).

    ``SHIFT``, ``HALF``, ``WIDE`` and ``FINAL`` are closure constants, folded at compile time (the
    final xor-shift of fmix32 only changes the low 16 bits: skipped where the value keeps fewer).
    """
    shift, half, wide, final = np.uint32(32 - bits), np.int32(1 << (bits - 1)), bits > 16, bits > 16
    block, m1, m2, s16, s13, golden = KERNEL_BLOCK, _M1, _M2, _S16, _S13, _UGOLDEN

    def kernel(row_vals, pair_vals, pair_row, a_seed, b_seed, n, high, low, rows_buf, a_cols, b_rows):
        for t0 in range(0, n, block):
            size = min(block, n - t0)
            ca = np.uint32((t0 * GOLDEN + a_seed) & 0xFFFFFFFF)
            cb = np.uint32((t0 * GOLDEN + b_seed) & 0xFFFFFFFF)
            for t in range(size):  # index values of A's columns and B's rows (full fmix32)
                g = np.uint32(np.uint32(t) * golden)
                z = np.uint32(g + ca)
                z ^= z >> s16
                z = np.uint32(z * m1)
                z ^= z >> s13
                z = np.uint32(z * m2)
                a_cols[t] = z ^ (z >> s16)
                z = np.uint32(g + cb)
                z ^= z >> s16
                z = np.uint32(z * m1)
                z ^= z >> s13
                z = np.uint32(z * m2)
                b_rows[t] = z ^ (z >> s16)
            for k in range(row_vals.shape[0]):  # the opened rows of A, centred
                r = row_vals[k]
                for t in range(size):
                    z = np.uint32(r + a_cols[t])
                    z ^= z >> s16
                    z = np.uint32(z * m1)
                    z ^= z >> s13
                    z = np.uint32(z * m2)
                    if final:
                        z ^= z >> s16
                    rows_buf[k, t] = np.int32(z >> shift) - half
            for q in range(pair_vals.shape[0]):  # per (row, column) pair: B's column and the dot
                c, k = pair_vals[q], pair_row[q]
                if wide:
                    s = np.int64(0)
                    for t in range(size):
                        z = np.uint32(c + b_rows[t])
                        z ^= z >> s16
                        z = np.uint32(z * m1)
                        z ^= z >> s13
                        z = np.uint32(z * m2)
                        if final:
                            z ^= z >> s16
                        s += np.int64(rows_buf[k, t]) * np.int64(np.int32(z >> shift) - half)
                else:
                    s32 = np.int32(0)
                    for t in range(size):
                        z = np.uint32(c + b_rows[t])
                        z ^= z >> s16
                        z = np.uint32(z * m1)
                        z ^= z >> s13
                        z = np.uint32(z * m2)
                        b = np.int32(np.int32(z >> shift) - half)
                        s32 = np.int32(s32 + np.int32(rows_buf[k, t] * b))
                    s = np.int64(s32)
                high[q] += s >> 32
                low[q] += s & 0xFFFFFFFF

    return kernel


_KERNELS: dict[int, object] = {}
_FAILED: list[str] = []  # why the kernel is unavailable in this process, once known
_LOCK = threading.Lock()  # threads may all ask at once: compile once


def _compile(bits: int):
    import numba

    kernel = _make_kernel(bits)
    try:
        compiled = numba.njit(nogil=True, cache=True, boundscheck=False)(kernel)
    except RuntimeError:  # no cache directory this process may write
        compiled = numba.njit(nogil=True, boundscheck=False)(kernel)
    _run(compiled, np.arange(2, dtype=np.uint32), np.arange(3, dtype=np.uint32), [0, 1, 1], 1, 2, 5)
    return compiled


def _kernel(bits: int):
    """The compiled kernel for ``bits`` (compiled or loaded on first use), or None without numba."""
    with _LOCK:
        if _FAILED:
            return None
        if bits not in _KERNELS:
            if os.environ.get(VERIFIER_ENV, "auto") == "numpy":
                _FAILED.append(f"{VERIFIER_ENV}=numpy")
                return None
            try:
                _KERNELS[bits] = _compile(bits)
            except Exception as exc:  # ImportError, or a numba that does not fit this numpy / CPU
                log.info("numba unavailable, the verifier stays on numpy: %s", exc)
                _FAILED.append(str(exc))
                return None
        return _KERNELS[bits]


def kernel_available() -> bool:
    """Whether the compiled verifier runs in this process (compiles the fp16 kernel on first call)."""
    return _kernel(PRECISION_BITS["fp16"]) is not None


def warm_up() -> bool:
    """Compile (or load) the kernel of every precision now, off any clock; False without numba."""
    return all(_kernel(bits) is not None for bits in sorted(set(PRECISION_BITS.values())))


def _run(kernel, row_vals, pair_vals, pair_row, a_seed: int, b_seed: int, n: int) -> list[int]:
    """Exact integer sums of every pair, from the kernel's two int64 words."""
    pairs = len(pair_vals)
    high, low = np.zeros(pairs, np.int64), np.zeros(pairs, np.int64)
    rows_buf = np.empty((max(1, len(row_vals)), KERNEL_BLOCK), np.int32)
    a_cols, b_rows = np.empty(KERNEL_BLOCK, np.uint32), np.empty(KERNEL_BLOCK, np.uint32)
    kernel(
        row_vals,
        pair_vals,
        np.asarray(pair_row, dtype=np.int64),
        a_seed,
        b_seed,
        n,
        high,
        low,
        rows_buf,
        a_cols,
        b_rows,
    )
    return [(int(h) << 32) + int(lo) for h, lo in zip(high, low, strict=True)]


def entries_numba(challenge, gpu: int, rows: list[int], cols: list[list[int]]) -> np.ndarray:
    """``recompute.expected_entries`` with the compiled kernel (numba must be available)."""
    bits = PRECISION_BITS[challenge.precision]
    kernel = _kernel(bits)
    if kernel is None:
        raise RuntimeError("the compiled verifier needs numba")
    if challenge.n > 1 << 26:
        raise ValueError(f"n = {challenge.n} is past the kernel's exact range (2**26)")
    key = subkey(bytes.fromhex(challenge.key), gpu)
    (a_rs, a_cs), (b_rs, b_cs) = matrix_seeds(key, MATRIX_A), matrix_seeds(key, MATRIX_B)
    pair_cols = [j for row_cols in cols for j in row_cols]
    pair_row = [k for k, row_cols in enumerate(cols) for _ in row_cols]
    row_vals, pair_vals = values_at(a_rs, np.asarray(rows)), values_at(b_cs, np.asarray(pair_cols))
    return scaled(_run(kernel, row_vals, pair_vals, pair_row, a_cs, b_rs, challenge.n), bits)
