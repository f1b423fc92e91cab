"""The real GPU paths of the verdicts benchmark: cuBLAS honest product and its reduced-precision shortcuts.

At a production n (C of ``side`` x ``side``: cuBLAS picks its kernels, split-K included, for that
shape) the slabs are generated on the device like the prover's (``gpu_gen.fill_block``) and
multiplied three ways:

- ``honest``: the prover's own call (``cuda_product.accumulate``: fp32 partial products);
- ``fp16 out, reduced-precision reduction``: each slab's product returned in fp16 by a plain
  ``a @ b`` with ``torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True`` (cuBLAS
  may then reduce split-K partials in fp16), added to an fp32 C;
- ``fp16 blocks of B``: fp16 accumulation promoted every B products, run as a batched GEMM over
  blocks of B with an fp16 result per block (one rounding per block: the least error of that family),
  blocks summed in fp32.

Sampled entries are compared with ``accumulation.Entries.exact``. Device-agnostic torch (tests run it
on the CPU); ``scripts/gpu_bench.sh`` runs it on a GPU. It does not decide anything.
"""

from __future__ import annotations

import numpy as np

from compute.pog.accumulation import Entries
from compute.pog.cuda_product import accumulate
from compute.pog.engine import DEFAULT_CHUNK
from compute.pog.generator import MATRIX_A, MATRIX_B, matrix_seeds, subkey
from compute.pog.gpu_gen import fill_block
from compute.pog.tolerance import tolerance

_DTYPE = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
BLOCKS = (16, 64, 256)


def device_product(precision: str, key: bytes, n: int, side: int, mode: str, device: str = "cuda"):
    """C (side x side, float32 numpy) of GPU 0's sub-challenge, multiplied the way ``mode`` names."""
    import torch

    gpu_key = subkey(key, 0)
    (a_rs, a_cs), (b_rs, b_cs) = matrix_seeds(gpu_key, MATRIX_A), matrix_seeds(gpu_key, MATRIX_B)
    dtype = getattr(torch, _DTYPE[precision])
    acc = torch.zeros((side, side), dtype=torch.float32, device=device)
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_fp16_reduced_precision_reduction
    matmul.allow_fp16_reduced_precision_reduction = mode == "fp16 out, reduced-precision reduction"
    try:
        for t0 in range(0, n, DEFAULT_CHUNK):
            width = min(DEFAULT_CHUNK, n - t0)
            a = torch.empty((side, width), dtype=dtype, device=device)
            b = torch.empty((width, side), dtype=dtype, device=device)
            fill_block(a, a_rs, a_cs, 0, t0, precision)
            fill_block(b, b_rs, b_cs, t0, 0, precision)
            _multiply(acc, a, b, mode)
    finally:
        matmul.allow_fp16_reduced_precision_reduction = before
    return acc.cpu().numpy()


def _multiply(acc, a, b, mode: str) -> None:
    import torch

    if mode == "honest":
        accumulate(acc, a, b)
    elif mode == "fp16 out, reduced-precision reduction":
        acc += (a @ b).float()
    elif mode.startswith("fp16 blocks of "):
        block = int(mode.rsplit(" ", 1)[1])
        width = a.shape[1] - a.shape[1] % block
        if width:
            blocks = width // block
            a3 = a[:, :width].reshape(a.shape[0], blocks, block).transpose(0, 1)
            b3 = b[:width].reshape(blocks, block, b.shape[1])
            acc += torch.bmm(a3, b3).sum(0, dtype=torch.float32)  # one fp16 result per block, in fp32
        if width < a.shape[1]:
            acc += (a[:, width:] @ b[width:]).float()
    else:
        raise ValueError(f"unknown mode {mode!r}")


def modes(precision: str) -> list[str]:
    names = ["honest"]
    if precision == "fp16":
        names += ["fp16 out, reduced-precision reduction"] + [f"fp16 blocks of {b}" for b in BLOCKS]
    return names


def cuda_report(
    precision: str, n: int, side: int = 256, entries: int = 16, device: str = "cuda", seed: int = 0
) -> dict:
    """Per mode: rms and largest error of ``entries`` sampled entries, and their ratio to the tolerance."""
    rng = np.random.default_rng(seed)
    key = rng.bytes(16)
    rows, cols = rng.integers(0, side, entries), rng.integers(0, side, entries)
    exact = Entries(precision, key, n, rows, cols).exact()
    tol = tolerance(precision, n)
    out: dict[str, object] = {"side": side, "tolerance": tol}
    for mode in modes(precision):
        err = np.abs(device_product(precision, key, n, side, mode, device)[rows, cols] - exact)
        rms = float(np.sqrt(np.mean(err**2)))
        out[mode] = {"rms": rms, "max": float(err.max()), "max_over_tol": float(err.max() / tol)}
    return out
