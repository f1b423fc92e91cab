"""Whole rows of a memory proof's matrix A in a compiled loop (numba): the validator's regeneration.

``verify.expected_rows`` regenerates a few secret rows of A to check the opened passes: ``n`` x
``hash_rounds`` mixer rounds per row (at the H100 shape 126,480 x 96), which numpy runs as ~9
whole-array uint32 passes per round in cache-sized pieces. This kernel keeps each element's two lanes
in registers through all rounds (AVX2: eight elements per instruction, native 32-bit multiplies), so
it moves each output word once. Bit-identical to ``kernel.elements_np`` (the same wrapping uint32
arithmetic; tests compare them); numpy remains the path without numba, for small work, or with
``COMPUTE_POG_VERIFIER=numpy``. Compiled once per process (cached on disk by numba), GIL released.
"""

from __future__ import annotations

import logging
import os
import threading

import numpy as np

from ..verify_kernel import VERIFIER_ENV
from .kernel import M1, M2, elements_np

log = logging.getLogger(__name__)

# element-rounds below which numpy is used (~3 ms of numpy: not worth loading the kernel)
ROWS_KERNEL_MIN = 1 << 22


_BLOCK = 1024  # elements whose two lanes stay in L1 while every round runs over them


def _rows_loop(rows, n, keys, out, lane_a):  # compiled by numba: no Python objects inside
    m1, m2, s15, s16 = np.uint32(M1), np.uint32(M2), np.uint32(15), np.uint32(16)
    k0, k1 = keys[0], keys[1]
    for r in range(rows.shape[0]):
        a0 = np.uint32(rows[r]) ^ k0
        for j0 in range(0, n, _BLOCK):
            size = min(_BLOCK, n - j0)
            b = out[r, j0 : j0 + size]  # lane b lives in the output row
            for j in range(size):
                lane_a[j] = a0
                b[j] = np.uint32(j0 + j) ^ k1
            for k in range(2, keys.shape[0]):  # round by round over the block: the j loop vectorises
                key = keys[k]
                for j in range(size):
                    a = np.uint32(np.uint32(lane_a[j] + key) ^ b[j])
                    a = np.uint32(a * m1)
                    a ^= a >> s16
                    lane_a[j] = a
                    c = np.uint32(np.uint32(b[j] ^ a) * m2)
                    b[j] = c ^ (c >> s15)


_COMPILED: list = []  # [kernel or None], filled on first use
_LOCK = threading.Lock()


def _kernel():
    with _LOCK:
        if not _COMPILED:
            _COMPILED.append(_compile())
        return _COMPILED[0]


def _compile():
    if os.environ.get(VERIFIER_ENV, "auto") == "numpy":
        return None
    try:
        import numba

        try:
            kernel = numba.njit(nogil=True, cache=True, boundscheck=False)(_rows_loop)
        except RuntimeError:  # no cache directory this process may write
            kernel = numba.njit(nogil=True, boundscheck=False)(_rows_loop)
        keys = np.arange(4, dtype=np.uint32)
        kernel(
            np.arange(1, dtype=np.uint32), 2, keys, np.empty((1, 2), np.uint32), np.empty(_BLOCK, np.uint32)
        )
        return kernel
    except Exception as exc:  # ImportError, or a numba that does not fit this numpy / CPU
        log.info("numba unavailable, memory rows stay on numpy: %s", exc)
        return None


def element_rows(rows: np.ndarray, n: int, keys: np.ndarray, backend: str = "auto") -> np.ndarray:
    """uint32 ``A[rows][:, :n]`` (``kernel.elements_np(rows, arange(n), keys)``): numba or numpy."""
    rows = np.asarray(rows, dtype=np.uint32)
    keys = np.ascontiguousarray(keys, dtype=np.uint32)
    work = len(rows) * n * max(0, len(keys) - 2)
    use = backend == "numba" or (backend == "auto" and work >= ROWS_KERNEL_MIN)
    kernel = _kernel() if use else None
    if kernel is None:
        if backend == "numba":
            raise RuntimeError("the compiled memory rows need numba")
        return elements_np(rows, np.arange(n, dtype=np.uint32), keys)
    out = np.empty((len(rows), n), dtype=np.uint32)
    kernel(rows, n, keys, out, np.empty(_BLOCK, np.uint32))
    return out
