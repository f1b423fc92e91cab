"""Memory proof on a CPU (host RAM): the element builder and the pass compiled by numba, per thread.

The host-RAM proof is judged against the fastest regeneration a host of its size could run: cores x
a per-core rate measured with this very kernel (``kernel.elements_np``'s mixer, vectorised by LLVM:
eight 32-bit lanes with AVX2, ~1e10 element-rounds/s per core, 10-30x numpy). An honest prover
must build A about as fast, or the rounds that make regeneration slow make its build slow; and its
pass must use every core, as a cheater's regeneration would. Both kernels release the GIL, so the
prover's thread pool splits rows across cores. Bit-identical to ``elements_np`` and ``product_np``
(wrapping uint32 arithmetic; tested).

numba is optional (compiled on first use, like ``cpu_gen``, ~2-5 s): without it, and for builds
below ``MEM_FUSED_MIN`` element-rounds (where the compile costs more than numpy), ``elements_cpu`` and
``product_cpu_rows`` are the numpy functions. Embedded verbatim in the worker script; the validator
never needs it (it checks 8 rows with numpy).
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from .kernel import M1, M2, elements_np, product_np

log = logging.getLogger(__name__)

MEM_FUSED_MIN = 1 << 30  # element-rounds of a build from which the compiled kernels are used
_MEM_M1, _MEM_M2 = np.uint32(M1), np.uint32(M2)
_MEM_S16, _MEM_S15 = np.uint32(16), np.uint32(15)


def _mem_elements(rows, cols, keys, out):  # compiled by numba: rounds outer, lanes inner (vectorised)
    n = cols.shape[0]
    a = np.empty(n, np.uint32)
    b = np.empty(n, np.uint32)
    for i in range(rows.shape[0]):
        first = np.uint32(rows[i] ^ keys[0])
        for j in range(n):
            a[j] = first
            b[j] = np.uint32(cols[j] ^ keys[1])
        for r in range(2, keys.shape[0]):
            k = keys[r]
            for j in range(n):
                x = np.uint32(np.uint32(a[j] + k) ^ b[j])
                x = np.uint32(x * _MEM_M1)
                x ^= x >> _MEM_S16
                y = np.uint32(b[j] ^ x)
                y = np.uint32(y * _MEM_M2)
                y ^= y >> _MEM_S15
                a[j] = x
                b[j] = y
        for j in range(n):
            out[i, j] = b[j]


def _mem_product(a, x, out):  # compiled by numba: y = A @ x mod 2**32
    for i in range(a.shape[0]):
        acc = np.uint32(0)
        for j in range(a.shape[1]):
            acc = np.uint32(acc + np.uint32(a[i, j] * x[j]))
        out[i] = acc


_MEM_KERNELS: list = []  # [(elements, product) or None], filled on first use
_MEM_LOCK = threading.Lock()


def _compile_mem_kernels():
    try:
        import numba

        compiled = tuple(numba.njit(nogil=True, boundscheck=False)(f) for f in (_mem_elements, _mem_product))
        keys = np.arange(4, dtype=np.uint32)
        compiled[0](
            np.arange(1, dtype=np.uint32), np.arange(8, dtype=np.uint32), keys, np.empty((1, 8), np.uint32)
        )
        compiled[1](np.ones((1, 8), np.uint32), np.ones(8, np.uint32), np.empty(1, np.uint32))
        return compiled
    except Exception as exc:  # ImportError, or a numba that does not fit this numpy / CPU
        log.info("numba unavailable, the host memory proof stays on numpy: %s", exc)
        return None


def mem_kernels():
    """(elements kernel, product kernel) compiled by numba, or None without numba."""
    with _MEM_LOCK:
        if not _MEM_KERNELS:
            _MEM_KERNELS.append(_compile_mem_kernels())
    return _MEM_KERNELS[0]


def elements_cpu(rows: np.ndarray, cols: np.ndarray, keys: np.ndarray, fused: bool = True) -> np.ndarray:
    """``elements_np(rows, cols, keys)``, with the compiled kernel when ``fused`` and numba is present."""
    kernels = mem_kernels() if fused else None
    if kernels is None:
        return elements_np(rows, cols, keys)
    out = np.empty((len(rows), len(cols)), np.uint32)
    kernels[0](rows.astype(np.uint32), cols.astype(np.uint32), keys, out)
    return out


def product_cpu_rows(a: np.ndarray, x: np.ndarray, fused: bool = True) -> np.ndarray:
    """``product_np(a, x)`` (rows of A times x mod 2**32), compiled when ``fused`` and numba is present."""
    kernels = mem_kernels() if fused else None
    if kernels is None:
        return product_np(a, x)
    out = np.empty(a.shape[0], np.uint32)
    kernels[1](a, np.ascontiguousarray(x, dtype=np.uint32), out)
    return out


def cpu_backend() -> str:
    return "numba" if mem_kernels() is not None else "numpy"
