"""Counter-based input generator for Proof-of-GPU, bit-identical in numpy, torch, numba and Triton.

Element ``(i, t)`` of a challenge matrix is a keyed hash of (key, gpu index, matrix id, row,
column): per-matrix seeds come from BLAKE2b over the challenge key, every row index and every
column index is turned into a 32-bit value by murmur3's finaliser ``fmix32`` (a bijection, so no
two rows or columns share a value), and the element is ``fmix32`` of ``row_value + column_value``
(mod 2**32). No recurrences, no dependence on ``i + j`` or ``i - j``. The top ``bits`` bits give an
integer ``k`` and the value ``k / 2**(bits - 1) - 1``: a dyadic grid in [-1, 1) exactly
representable in the challenge precision (fp16: 11 bits, bf16: 8 bits, fp32: 24 bits).

Why 32-bit words (version 2; version 1 used splitmix64): every operation is a native 32-bit one on
GPUs (a 64-bit multiply is several instructions there) and on AVX2 (which has no 64-bit multiply),
and numpy moves half the bytes, so the validator's re-computation, the miner's CPU path and the
GPU kernel all cost about half as much. A cheater gains nothing from the smaller word: computing
``A @ B`` through the sum structure needs transforms over the group of 2**32 values, far more work
than the GEMM at any challenge shape.

The last xor-shift of the finaliser (``h ^= h >> 16``) only changes bits 0..15, so for fp16 and
bf16 (top 11 / 8 bits) numpy skips it; the compiled kernels always apply it. Torch works on int64
holding 32-bit words (masked after each product: two's-complement wrap-around keeps the low 32 bits
exact).

This module depends on stdlib and numpy only (torch optional) and is embedded verbatim in the
worker script. It does not multiply matrices, hash outputs or talk to anything.
"""

from __future__ import annotations

import hashlib

import numpy as np

GEN_VERSION = b"compute-pog-gen/2"
GOLDEN = 0x9E3779B9  # 2**32 / golden ratio, odd: i -> i * GOLDEN is a bijection mod 2**32
MIX1 = 0x85EBCA6B  # murmur3 fmix32 multipliers
MIX2 = 0xC2B2AE35
WORD = 32
MASK = (1 << WORD) - 1
PRECISION_BITS = {"fp16": 11, "bf16": 8, "fp32": 24}
MATRIX_A = 0
MATRIX_B = 1

_U16, _U13 = np.uint32(16), np.uint32(13)
_UGOLDEN, _UMIX1, _UMIX2 = np.uint32(GOLDEN), np.uint32(MIX1), np.uint32(MIX2)


def fmix32(value: int) -> int:
    """murmur3's 32-bit finaliser on one Python int: the scalar definition the array versions follow."""
    h = value & MASK
    h ^= h >> 16
    h = (h * MIX1) & MASK
    h ^= h >> 13
    h = (h * MIX2) & MASK
    return h ^ (h >> 16)


def subkey(key: bytes, gpu_index: int) -> bytes:
    """Per-GPU 16-byte key derived from the challenge key."""
    data = GEN_VERSION + b"|gpu|" + key + int(gpu_index).to_bytes(4, "little")
    return hashlib.blake2b(data, digest_size=16).digest()


def matrix_seeds(gpu_key: bytes, matrix: int) -> tuple[int, int]:
    """32-bit (row_seed, col_seed) for matrix ``MATRIX_A`` or ``MATRIX_B`` of one GPU."""
    digest = hashlib.blake2b(GEN_VERSION + b"|mat|" + gpu_key + bytes([matrix]), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:], "little")


def counter_offset(seed: int, start: int) -> int:
    """``(start * GOLDEN + seed) mod 2**32``: index ``start + i`` hashes ``i * GOLDEN`` plus this."""
    return (start * GOLDEN + seed) & MASK


def fmix32_into(z: np.ndarray, tmp: np.ndarray, final: bool = True) -> np.ndarray:
    """``fmix32`` of the uint32 array ``z`` in place (``tmp``: a scratch array of its shape).

    ``final=False`` skips the last ``h ^= h >> 16``, which changes only bits 0..15. Overflow warnings
    must be silenced by the caller (``np.errstate(over="ignore")``).
    """
    np.right_shift(z, _U16, out=tmp)
    z ^= tmp
    z *= _UMIX1
    np.right_shift(z, _U13, out=tmp)
    z ^= tmp
    z *= _UMIX2
    if final:
        np.right_shift(z, _U16, out=tmp)
        z ^= tmp
    return z


def index_values(seed: int, start: int, count: int) -> np.ndarray:
    """``fmix32((start + i) * GOLDEN + seed)`` for i < count, as uint32 (row or column values)."""
    with np.errstate(over="ignore"):
        z = np.arange(count, dtype=np.uint32) * _UGOLDEN
        z += np.uint32(counter_offset(seed, start))
        return fmix32_into(z, np.empty_like(z))


def values_at(seed: int, indices: np.ndarray) -> np.ndarray:
    """``index_values`` at arbitrary indices (the verifier's opened rows and checked columns)."""
    idx = (np.asarray(indices, dtype=np.uint64) & np.uint64(MASK)).astype(np.uint32)
    with np.errstate(over="ignore"):
        idx *= _UGOLDEN
        idx += np.uint32(seed & MASK)
        return fmix32_into(idx, np.empty_like(idx))


def _element_words(bits: int, z: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """``k = fmix32(z) >> (32 - bits)`` in place; z holds ``row_value + column_value`` (uint32)."""
    fmix32_into(z, tmp, final=bits > 16)  # the final xor-shift leaves the top 16 bits alone
    z >>= np.uint32(WORD - bits)
    return z


def centered_block(
    fixed: tuple[np.ndarray, np.ndarray],
    vals: tuple[np.ndarray, np.ndarray],
    bits: int,
    z: np.ndarray,
    tmp: np.ndarray,
    out: np.ndarray,
) -> np.ndarray:
    """Float64 ``k - 2**(bits-1)`` (element = that times 2**-(bits-1)) of two stacked vector sets, in ``out``.

    Rows ``[0, len(fixed[0]))`` pair ``fixed[0]`` with ``vals[0]``, the rest pair ``fixed[1]`` with
    ``vals[1]`` (opened rows of A and checked columns of B share every pass). Centred integers keep
    products exact in float64 (|k| <= 2**23, a product < 2**46). ``z``/``tmp`` are caller-owned
    uint32 buffers and ``out`` a float64 buffer, all of shape ``[len(fixed[0]) + len(fixed[1]),
    len(vals[0])]``. Overflow warnings must be silenced by the caller (``np.errstate``, once per loop).
    """
    split = len(fixed[0])
    np.add(fixed[0][:, None], vals[0][None, :], out=z[:split])
    np.add(fixed[1][:, None], vals[1][None, :], out=z[split:])
    _element_words(bits, z, tmp)
    return np.subtract(z, float(2 ** (bits - 1)), out=out)


def _scale(bits: int) -> float:
    return 2.0 ** -(bits - 1)


# Elements per generation step: the uint32 temporaries (2 x 4 bytes per element) stay in L2.
# One pass over a whole 4096 x 4096 slab is memory-bound and ~20x slower per element.
_BLOCK_ELEMENTS = 1 << 17


def mix_block_np(
    row_vals: np.ndarray, col_vals: np.ndarray, bits: int, out: np.ndarray | None = None
) -> np.ndarray:
    """Float32 block ``[len(row_vals), len(col_vals)]`` of generated values (numpy)."""
    rows, cols = len(row_vals), len(col_vals)
    if out is None:
        out = np.empty((rows, cols), dtype=np.float32)
    step = max(1, _BLOCK_ELEMENTS // max(cols, 1))
    z_buf = np.empty((min(step, rows), cols), dtype=np.uint32)
    tmp_buf = np.empty_like(z_buf)
    scale, one = np.float32(_scale(bits)), np.float32(1.0)
    for r0 in range(0, rows, step):
        r1 = min(r0 + step, rows)
        z, tmp = z_buf[: r1 - r0], tmp_buf[: r1 - r0]
        with np.errstate(over="ignore"):
            np.add(row_vals[r0:r1, None], col_vals[None, :], out=z)
            _element_words(bits, z, tmp)
        block = out[r0:r1]
        np.copyto(block, z, casting="unsafe")  # k < 2**24: exact in float32
        block *= scale
        block -= one
    return out


def mix_vector_f64(fixed: int, vals: np.ndarray, bits: int) -> np.ndarray:
    """Float64 values of one row (fixed row value, varying column values) or one column."""
    with np.errstate(over="ignore"):
        z = vals + np.uint32(fixed)
        _element_words(bits, z, np.empty_like(z))
    out = z.astype(np.float64)
    out *= _scale(bits)
    out -= 1.0
    return out


def fmix32_torch(z):
    """``fmix32`` of an int64 tensor holding 32-bit words (0 <= z < 2**32), in place, on any device."""
    z ^= z >> 16
    z *= MIX1
    z &= MASK
    z ^= z >> 13
    z *= MIX2
    z &= MASK
    z ^= z >> 16
    return z


def mix_block_torch(row_vals, col_vals, bits: int):  # torch int64 tensors of 32-bit words -> float32 tensor
    """Torch twin of ``mix_block_np`` on int64 tensors holding uint32 values (any device), bit-identical."""
    import torch

    z = row_vals[:, None] + col_vals[None, :]
    z &= MASK
    k = fmix32_torch(z) >> (WORD - bits)
    out = k.to(dtype=torch.float32)
    out.mul_(_scale(bits)).sub_(1.0)
    return out


def matrix_block_np(
    gpu_key: bytes, matrix: int, bits: int, rows: tuple[int, int], cols: tuple[int, int]
) -> np.ndarray:
    """Block ``[r0:r1, c0:c1]`` of matrix A or B of one GPU, float32 (convenience for tests)."""
    row_seed, col_seed = matrix_seeds(gpu_key, matrix)
    row_vals = index_values(row_seed, rows[0], rows[1] - rows[0])
    col_vals = index_values(col_seed, cols[0], cols[1] - cols[0])
    return mix_block_np(row_vals, col_vals, bits)


def scaled(integers: list[int], bits: int) -> np.ndarray:
    """Float64 entries from the exact integer sums: each correctly rounded, times ``2**-(2(bits-1))``."""
    return np.array([float(v) for v in integers], dtype=np.float64) * (2.0 ** -(bits - 1)) ** 2
