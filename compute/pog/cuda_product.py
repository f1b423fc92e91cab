"""The GEMM proof's product on one CUDA device: fused generation on a side stream, GEMM on the main one.

Slab k+1 of A and B is generated (``gpu_gen.fill_block``, one write per element) on a second stream
into the other half of a double buffer while the GEMM of slab k accumulates into C on the main
stream; events order "slab ready" and "slab consumed", so the loop has no host-to-device copy and no
synchronize: the host only enqueues. fp16/bf16 slabs use ``addmm(out_dtype=float32)`` into C in place
(fp32 partial products, never rounded to 16 bits); fp32 runs with TF32 disabled by the engine.
``warm_up`` runs a tiny product per precision so kernel compilation and cuBLAS set-up happen when the
worker starts, outside the validator's clock. Embedded in the worker script; torch is imported lazily.
"""

from __future__ import annotations

import numpy as np

from .gpu_gen import fill_block

_DTYPE_NAME = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def accumulate(acc, a, b) -> None:
    """acc += a @ b in place, with fp32 partial products for 16-bit inputs."""
    import torch

    if a.dtype == torch.float32:
        acc.addmm_(a, b)
        return
    try:
        torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)
    except (TypeError, RuntimeError):  # torch without the dtype overload: exact upcast, fp32 sums
        acc.addmm_(a.float(), b.float())


def product_on_device(
    precision: str,
    shape: tuple[int, int, int],
    chunks: list[tuple[int, int]],
    seeds: tuple[tuple[int, int], tuple[int, int]],
    device_index: int,
) -> np.ndarray:
    """C = A @ B (float32, on the host) for one sub-challenge on ``cuda:device_index``."""
    import torch

    m, _, p = shape
    (a_rs, a_cs), (b_rs, b_cs) = seeds
    dtype = getattr(torch, _DTYPE_NAME[precision])
    device = torch.device("cuda", device_index)
    with torch.cuda.device(device):
        main, side = torch.cuda.current_stream(device), torch.cuda.Stream(device)
        width = max(t1 - t0 for t0, t1 in chunks)
        slabs = [
            (
                torch.empty((m, width), dtype=dtype, device=device),
                torch.empty((width, p), dtype=dtype, device=device),
            )
            for _ in range(2)
        ]
        ready = [torch.cuda.Event(), torch.cuda.Event()]
        consumed = [torch.cuda.Event(), torch.cuda.Event()]
        acc = torch.zeros((m, p), dtype=torch.float32, device=device)

        def generate(k: int):
            t0, t1 = chunks[k]
            a, b = slabs[k % 2][0][:, : t1 - t0], slabs[k % 2][1][: t1 - t0]
            with torch.cuda.stream(side):
                if k >= 2:
                    side.wait_event(consumed[k % 2])  # the GEMM of slab k-2 has read this buffer
                fill_block(a, a_rs, a_cs, 0, t0, precision)
                fill_block(b, b_rs, b_cs, t0, 0, precision)
                ready[k % 2].record(side)
            return a, b

        pending = generate(0)
        for k in range(len(chunks)):
            a, b = pending
            main.wait_event(ready[k % 2])
            if k + 1 < len(chunks):
                pending = generate(k + 1)
            accumulate(acc, a, b)
            consumed[k % 2].record(main)
        return acc.cpu().numpy()  # the one device-to-host copy, after the last GEMM


def warm_up(device_count: int) -> None:
    """Compile the generator and initialise cuBLAS for every precision on every device."""
    for index in range(device_count):
        for precision in _DTYPE_NAME:
            product_on_device(precision, (64, 128, 64), [(0, 64), (64, 128)], ((1, 2), (3, 4)), index)
