"""Fused CPU input generator (numba, optional): ``generator.mix_block_np`` in one pass per element.

numpy evaluates the counter-based generator in ~10 whole-array passes over uint32 temporaries.
This kernel runs the same uint32 operations per element in registers (LLVM vectorises the loop
with AVX2: eight 32-bit lanes, native multiplies) and writes each float32 once, so at 4096 x 4096
it is bound by the memory bandwidth of that one write. Bit-identical to numpy by construction: the
same wrap-around uint32 arithmetic (the full ``fmix32``, whose last step numpy skips only where it
cannot change the top bits). The value ``k / 2**(bits-1) - 1`` is formed without a variable shift
(numba widens one to 64 bits, which halved the speed): the word's top ``bits`` bits with its sign
bit flipped, read as int32, are ``k * 2**(32-bits) - 2**31`` -- at most 24 significant bits, so the
float32 conversion is exact -- and times ``2**-31`` that is the value, exactly.

numba is optional (the ``miner`` and ``dev`` extras). Without it, or for calls below
``CPU_FUSED_MIN_ELEMENTS`` (small shapes: a JIT compile of ~1.5-4 s is not worth it), ``fill_cpu_block``
is ``mix_block_np``. The kernel is compiled once per process (``cache=True`` keeps it on disk when the
source is a file in a writable directory; the validator's worker runs from ``exec`` and compiles) on
the first large call, which the engine's warm-up makes: the compile stays off the validator's clock.
numba releases the GIL in the kernel, so the engine's thread pool splits rows as it does for numpy.
Embedded verbatim in the worker script; the validator never imports it.
"""

from __future__ import annotations

import logging
import os
import threading

import numpy as np

from .generator import MIX1, MIX2, WORD, mix_block_np

log = logging.getLogger(__name__)

# Elements per call from which the fused kernel is used (the engine's pieces at 4096 x 4096: 8M).
CPU_FUSED_MIN_ELEMENTS = 1 << 20
# "numpy" forces the numpy generator (comparisons, or a miner whose numba misbehaves).
CPU_GENERATOR_ENV = "COMPUTE_POG_CPU_GENERATOR"

_CPU_M1, _CPU_M2 = np.uint32(MIX1), np.uint32(MIX2)
_CPU_S16, _CPU_S13 = np.uint32(16), np.uint32(13)
_CPU_SIGN = np.uint32(1 << 31)
_CPU_SCALE = np.float32(2.0**-31)


def _high_mask(bits: int) -> np.uint32:
    """The top ``bits`` bits of a 32-bit word."""
    return np.uint32(((1 << bits) - 1) << (WORD - bits))


def _cpu_fill_rows(row_vals, col_vals, high_mask, out):  # compiled by numba: no Python objects inside
    for i in range(row_vals.shape[0]):
        r = row_vals[i]
        for j in range(col_vals.shape[0]):
            z = np.uint32(r + col_vals[j])
            z ^= z >> _CPU_S16
            z = np.uint32(z * _CPU_M1)
            z ^= z >> _CPU_S13
            z = np.uint32(z * _CPU_M2)
            z ^= z >> _CPU_S16
            out[i, j] = np.float32(np.int32((z & high_mask) ^ _CPU_SIGN)) * _CPU_SCALE


_CPU_KERNEL: list = []  # [compiled kernel or None], filled on first use
_CPU_KERNEL_LOCK = threading.Lock()  # the engine's threads may all ask at once: compile once


def _compile_cpu_kernel():
    """``_cpu_fill_rows`` compiled by numba now (same argument types as the engine's calls), or None."""
    if os.environ.get(CPU_GENERATOR_ENV, "auto") == "numpy":
        return None
    try:
        import numba

        try:
            kernel = numba.njit(nogil=True, cache=True, boundscheck=False)(_cpu_fill_rows)
        except RuntimeError:  # no cache locator: the worker runs from exec(), not from a file
            kernel = numba.njit(nogil=True, boundscheck=False)(_cpu_fill_rows)
        trial = np.empty((1, 8), np.float32)
        kernel(np.arange(1, dtype=np.uint32), np.arange(8, dtype=np.uint32), _high_mask(11), trial)
        return kernel
    except Exception as exc:  # ImportError, or a numba that does not fit this numpy / CPU
        log.info("numba unavailable, CPU generator stays on numpy: %s", exc)
        return None


def cpu_fused_kernel():
    """The numba-compiled ``_cpu_fill_rows``, or None when numba is absent or disabled."""
    with _CPU_KERNEL_LOCK:
        if not _CPU_KERNEL:
            _CPU_KERNEL.append(_compile_cpu_kernel())
    return _CPU_KERNEL[0]


def fill_cpu_fused(row_vals: np.ndarray, col_vals: np.ndarray, bits: int, out: np.ndarray) -> np.ndarray:
    """``mix_block_np(row_vals, col_vals, bits, out)`` with the fused kernel (numba must be present)."""
    kernel = cpu_fused_kernel()
    if kernel is None:
        raise RuntimeError("the fused CPU generator needs numba")
    kernel(row_vals, col_vals, _high_mask(bits), out)
    return out


def fill_cpu_block(row_vals: np.ndarray, col_vals: np.ndarray, bits: int, out: np.ndarray) -> np.ndarray:
    """Float32 block ``[len(row_vals), len(col_vals)]`` into ``out``: the fused kernel, else numpy."""
    if len(row_vals) * len(col_vals) >= CPU_FUSED_MIN_ELEMENTS and cpu_fused_kernel() is not None:
        return fill_cpu_fused(row_vals, col_vals, bits, out)
    return mix_block_np(row_vals, col_vals, bits, out)


def cpu_generator_backend(elements: int = CPU_FUSED_MIN_ELEMENTS) -> str:
    """Which generator ``fill_cpu_block`` uses for calls of ``elements``: "numba" or "numpy"."""
    return "numba" if elements >= CPU_FUSED_MIN_ELEMENTS and cpu_fused_kernel() is not None else "numpy"
