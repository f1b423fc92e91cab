"""Counter-based input generator for Proof-of-GPU, bit-identical in numpy and torch.

Element ``(i, t)`` of a challenge matrix is a keyed hash of (key, gpu index, matrix id, row,
column): per-matrix seeds come from BLAKE2b over the challenge key, every row index and every
column index is turned into a 64-bit value by the splitmix64 finaliser, and the element is the
splitmix64 finaliser applied to ``row_value + column_value`` (mod 2**64). No recurrences, no
dependence on ``i + j`` or ``i - j``. The top ``bits`` bits give an integer ``k`` and the value
``k / 2**(bits - 1) - 1``: a dyadic grid in [-1, 1) exactly representable in the challenge
precision (fp16: 11 bits, bf16: 8 bits, fp32: 24 bits).

The last xor-shift of the finaliser (``z ^= z >> 31``) only touches bits 0..32, so it is skipped
in the element stage: only the top <= 24 bits are used. numpy works on uint64; torch on int64
with masked logical shifts (two's-complement wrap-around makes the products identical).

This module depends on stdlib and numpy only (torch optional) and is embedded verbatim in the
worker script. It does not multiply, hash outputs or talk to anything.
"""

from __future__ import annotations

import hashlib

import numpy as np

GEN_VERSION = b"compute-pog-gen/1"
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
PRECISION_BITS = {"fp16": 11, "bf16": 8, "fp32": 24}
MATRIX_A = 0
MATRIX_B = 1

_U30, _U27, _U31 = np.uint64(30), np.uint64(27), np.uint64(31)
_UGOLDEN, _UMIX1, _UMIX2 = np.uint64(GOLDEN), np.uint64(MIX1), np.uint64(MIX2)


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def subkey(key: bytes, gpu_index: int) -> bytes:
    """Per-GPU 16-byte key derived from the challenge key."""
    data = GEN_VERSION + b"|gpu|" + key + int(gpu_index).to_bytes(4, "little")
    return hashlib.blake2b(data, digest_size=16).digest()


def matrix_seeds(gpu_key: bytes, matrix: int) -> tuple[int, int]:
    """(row_seed, col_seed) for matrix ``MATRIX_A`` or ``MATRIX_B`` of one GPU."""
    digest = hashlib.blake2b(GEN_VERSION + b"|mat|" + gpu_key + bytes([matrix]), digest_size=16).digest()
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")


def index_values(seed: int, start: int, count: int) -> np.ndarray:
    """splitmix64 outputs ``fmix64(seed + (start + i) * GOLDEN)`` for i < count, as uint64."""
    return values_at(seed, np.arange(start, start + count, dtype=np.uint64))


def values_at(seed: int, indices: np.ndarray) -> np.ndarray:
    """``index_values`` at arbitrary indices (the verifier's opened rows and checked columns)."""
    idx = np.asarray(indices, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = idx * _UGOLDEN
        z += np.uint64(seed)
        z ^= z >> _U30
        z *= _UMIX1
        z ^= z >> _U27
        z *= _UMIX2
        z ^= z >> _U31
    return z


# Exponent bits of 2**52: for an integer 0 <= k < 2**52, ``k | _MAGIC`` read as float64 is exactly 2**52 + k.
_MAGIC = np.uint64(0x4330000000000000)


def centered_block(
    fixed: tuple[np.ndarray, np.ndarray],
    vals: tuple[np.ndarray, np.ndarray],
    bits: int,
    z: np.ndarray,
    tmp: np.ndarray,
) -> np.ndarray:
    """Float64 ``k - 2**(bits-1)`` (element = that times 2**-(bits-1)) of two stacked vector sets, in ``z``.

    Rows ``[0, len(fixed[0]))`` pair ``fixed[0]`` with ``vals[0]``, the rest pair ``fixed[1]`` with
    ``vals[1]`` (opened rows of A and checked columns of B share every pass). Centred integers keep
    products and block sums exact in float64 (|k| <= 2**23, a product < 2**46). The integer-to-float
    conversion is two cheap passes instead of numpy's scalar int64 cast: ``k | _MAGIC`` is the float
    2**52 + k, minus 2**52 + 2**(bits-1). ``z``/``tmp`` are caller-owned uint64 buffers of shape
    ``[len(fixed[0]) + len(fixed[1]), len(vals[0])]``; the result is ``z`` viewed as float64.
    Overflow warnings must be silenced by the caller (``np.errstate(over="ignore")``, once per loop).
    """
    split = len(fixed[0])
    np.add(fixed[0][:, None], vals[0][None, :], out=z[:split])
    np.add(fixed[1][:, None], vals[1][None, :], out=z[split:])
    np.right_shift(z, _U30, out=tmp)
    z ^= tmp
    z *= _UMIX1
    np.right_shift(z, _U27, out=tmp)
    z ^= tmp
    z *= _UMIX2
    z >>= np.uint64(64 - bits)
    z |= _MAGIC
    out = z.view(np.float64)
    out -= float(2**52 + 2 ** (bits - 1))
    return out


def _scale(bits: int) -> float:
    return 2.0 ** -(bits - 1)


# Elements per generation step: the uint64 temporaries (2 x 8 bytes per element) stay in L2.
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
    z_buf = np.empty((min(step, rows), cols), dtype=np.uint64)
    tmp_buf = np.empty_like(z_buf)
    scale, one, shift = np.float32(_scale(bits)), np.float32(1.0), np.uint64(64 - bits)
    for r0 in range(0, rows, step):
        r1 = min(r0 + step, rows)
        z, tmp = z_buf[: r1 - r0], tmp_buf[: r1 - r0]
        with np.errstate(over="ignore"):
            np.add(row_vals[r0:r1, None], col_vals[None, :], out=z)
            np.right_shift(z, _U30, out=tmp)
            z ^= tmp
            z *= _UMIX1
            np.right_shift(z, _U27, out=tmp)
            z ^= tmp
            z *= _UMIX2
        z >>= shift
        block = out[r0:r1]
        np.copyto(block, z.view(np.int64), casting="unsafe")
        block *= scale
        block -= one
    return out


def mix_vector_f64(fixed: int, vals: np.ndarray, bits: int) -> np.ndarray:
    """Float64 values of one row (fixed row value, varying column values) or one column."""
    with np.errstate(over="ignore"):
        z = vals + np.uint64(fixed)
        z ^= z >> _U30
        z *= _UMIX1
        z ^= z >> _U27
        z *= _UMIX2
    z >>= np.uint64(64 - bits)
    out = z.view(np.int64).astype(np.float64)
    out *= _scale(bits)
    out -= 1.0
    return out


def mix_block_torch(row_vals, col_vals, bits: int):  # torch int64 tensors -> float32 tensor
    """Torch twin of ``mix_block_np`` on int64 tensors (any device), bit-identical."""
    import torch

    z = row_vals[:, None] + col_vals[None, :]
    z ^= (z >> 30) & ((1 << 34) - 1)
    z *= _signed64(MIX1)
    z ^= (z >> 27) & ((1 << 37) - 1)
    z *= _signed64(MIX2)
    k = (z >> (64 - bits)) & ((1 << bits) - 1)
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
