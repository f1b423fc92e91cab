"""Fused GPU generator: one Triton kernel computes challenge elements and writes them in the target dtype.

Each program instance computes a ``BLOCK_R x BLOCK_C`` tile: the fmix32 values of its rows and
columns from (seed, index) in registers, the element finaliser on every (row, column) pair (all
native 32-bit integer instructions: two multiplies, three shift-xors, one add per element), the
dyadic value ``k / 2**(bits-1) - 1`` in fp32 (exact) and one store in fp16/bf16/fp32. Nothing is
read from memory, so an element costs one write (2 bytes in fp16) and no host-to-device copy is
needed: ``GEN_BYTES_PER_ELEM``. Bit-identical to ``generator.mix_block_np`` (tested on CPU with
``TRITON_INTERPRET=1`` and on CUDA when present).

``fill_block`` picks the kernel when Triton can run it (a CUDA tensor, or the interpreter) and falls
back to ``generator.mix_block_torch`` (torch int64 ops, ~15 kernels) otherwise. Optional imports
only; embedded verbatim in the worker script after ``generator.py``. It does not multiply or hash.
"""

from __future__ import annotations

import logging
import os

from .generator import (
    GOLDEN,
    MASK,
    MIX1,
    MIX2,
    PRECISION_BITS,
    WORD,
    counter_offset,
    fmix32_torch,
    mix_block_torch,
)

log = logging.getLogger(__name__)

try:  # optional: CPU miners and the validator never need it
    import triton
    import triton.language as tl
except Exception:  # ImportError, or a broken install that fails while loading
    triton = None
    tl = None

BLOCK_R = 64
BLOCK_C = 128
# one 2-byte store per fp16 element; the tile's row/column values are computed, not loaded
GEN_BYTES_PER_ELEM = {"fp16": 2.0, "bf16": 2.0, "fp32": 4.0}
# 32-bit integer instructions per element (the row/column values, one per tile row or column, are
# negligible): add, 2 x (shift, xor, multiply), the shift to k, int->float, multiply-add, the
# conversion to the stored dtype = 11; fp32 adds the final shift-xor (13). Version 1's two 64-bit
# multiplies and 64-bit shift-xors took ~20 (measured on an H100: ~775 G elements/s, which is this
# count at the H100's INT32 rate).
GEN_INT_OPS_PER_ELEM = {"fp16": 11.0, "bf16": 11.0, "fp32": 13.0}


if triton is not None:
    try:  # jit needs the source file: a worker exec'd from a string (python3 -c) falls back to torch
        MIX1_U = tl.constexpr(MIX1)
        MIX2_U = tl.constexpr(MIX2)
        GOLDEN_U = tl.constexpr(GOLDEN)

        @triton.jit
        def _fmix32(z, FINAL: tl.constexpr):  # z: uint32 tensor
            z ^= z >> 16
            z *= MIX1_U
            z ^= z >> 13
            z *= MIX2_U
            if FINAL:  # the last xor-shift changes bits 0..15 only: skipped where k has <= 16 bits
                z ^= z >> 16
            return z

        @triton.jit
        def _index_values(offset, offsets):
            # offset = (start * GOLDEN + seed) mod 2**32, precomputed: the counter is i * GOLDEN + offset
            z = offsets.to(tl.uint32) * GOLDEN_U + offset.to(tl.uint32)
            return _fmix32(z, True)

        # offsets are runtime values: specialising 1 (or 16-aligned) into constants breaks .to()
        @triton.jit(do_not_specialize=["row_offset", "col_offset"])
        def _gen_kernel(
            out_ptr,
            rows,
            cols,
            stride,
            row_offset,
            col_offset,
            SHIFT: tl.constexpr,
            FINAL: tl.constexpr,
            SCALE: tl.constexpr,
            BR: tl.constexpr,
            BC: tl.constexpr,
        ):
            r = tl.program_id(0) * BR + tl.arange(0, BR)
            c = tl.program_id(1) * BC + tl.arange(0, BC)
            rv = _index_values(row_offset, r)
            cv = _index_values(col_offset, c)
            z = _fmix32(rv[:, None] + cv[None, :], FINAL)
            k = (z >> SHIFT).to(tl.int32)
            value = k.to(tl.float32) * SCALE - 1.0
            mask = (r[:, None] < rows) & (c[None, :] < cols)
            offsets = r[:, None].to(tl.int64) * stride + c[None, :]
            tl.store(out_ptr + offsets, value.to(out_ptr.dtype.element_ty), mask=mask)
    except (OSError, TypeError, ValueError) as exc:
        log.info("fused generator unavailable (%s): torch fallback", exc)
        triton = None


_failed: list[str] = []  # a kernel that failed to compile or launch once is not retried


def triton_usable(tensor) -> bool:
    """Whether the fused kernel can write ``tensor`` here (CUDA, or CPU under TRITON_INTERPRET=1)."""
    if triton is None or _failed:
        return False
    return tensor.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def fill_block(out, row_seed: int, col_seed: int, row_start: int, col_start: int, precision: str) -> str:
    """Write ``out[i, t]`` = element of (row_start + i, col_start + t); returns "triton" or "torch".

    ``out`` is a 2-D tensor whose rows are contiguous (stride 1 along columns) in fp16/bf16/fp32.
    """
    bits = PRECISION_BITS[precision]
    rows, cols = out.shape
    if triton_usable(out) and out.stride(1) == 1:
        grid = (triton.cdiv(rows, BLOCK_R), triton.cdiv(cols, BLOCK_C))
        try:
            _gen_kernel[grid](
                out,
                rows,
                cols,
                out.stride(0),
                counter_offset(row_seed, row_start),
                counter_offset(col_seed, col_start),
                SHIFT=WORD - bits,
                FINAL=bits > 16,
                SCALE=2.0 ** -(bits - 1),
                BR=BLOCK_R,
                BC=BLOCK_C,
            )
            return "triton"
        except Exception as exc:  # a compiler/driver problem must cost speed, never the proof
            log.warning(
                "fused generator failed (%s: %s): torch fallback from now on", type(exc).__name__, exc
            )
            _failed.append(repr(exc))
    out.copy_(
        mix_block_torch(
            index_values_torch(row_seed, row_start, rows, out.device),
            index_values_torch(col_seed, col_start, cols, out.device),
            bits,
        )
    )
    return "torch"


def index_values_torch(seed: int, start: int, count: int, device):
    """``generator.index_values`` as an int64 tensor of 32-bit words computed on ``device`` (no host copy)."""
    import torch

    z = torch.arange(count, dtype=torch.int64, device=device)
    z *= GOLDEN
    z += counter_offset(seed, start)
    z &= MASK
    return fmix32_torch(z)
