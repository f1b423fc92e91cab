"""Figures of the prover's non-GEMM work: generator speed (CPU, GPU), Merkle hashing, GPU roofline.

``generator_ns_per_elem_cpu`` times the engine's CPU generation (``cpu_gen.fill_cpu_block``: the
fused numba kernel when installed, else numpy blocks; in ``threads`` threads) per element, after a
warm-up call that pays the JIT compile; ``merkle_vs_sha256`` compares ``hash_rows`` with raw
``hashlib.sha256`` over the same bytes on the same threads; ``gpu_generator_gbs`` times the fused
kernel on a CUDA device; ``roofline`` estimates commit/GEMM for a table GPU from the kernel's bytes
and integer instructions per element, the table's bandwidth, the GPU's INT32 rate and its GEMM
throughput (what the bench prints when no GPU is present). Advisory only.
"""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from compute.pog.cpu_gen import cpu_generator_backend, fill_cpu_block
from compute.pog.generator import PRECISION_BITS, index_values
from compute.pog.gpu_gen import GEN_BYTES_PER_ELEM, GEN_INT_OPS_PER_ELEM
from compute.pog.merkle import hash_rows


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def generator_ns_per_elem_cpu(
    threads: int, rows: int = 4096, cols: int = 4096, precision: str = "fp32", repeats: int = 7
) -> float:
    """Wall ns per generated element of a ``rows x cols`` slab split over ``threads`` (as the engine)."""
    bits = PRECISION_BITS[precision]
    row_vals, col_vals = index_values(1, 0, rows), index_values(2, 0, cols)
    out = np.empty((rows, cols), dtype=np.float32)
    bounds = [rows * k // threads for k in range(threads + 1)]
    with ThreadPoolExecutor(max_workers=threads) as pool:

        def run() -> None:
            parts = [
                pool.submit(fill_cpu_block, row_vals[r0:r1], col_vals, bits, out[r0:r1])
                for r0, r1 in zip(bounds, bounds[1:], strict=False)
            ]
            for part in parts:
                part.result()

        run()  # warm-up: first touch of ``out``, numba's compile (or cache load)
        return _best(run, repeats) / (rows * cols) * 1e9


def merkle_vs_sha256(threads: int, rows: int = 4096, cols: int = 4096, repeats: int = 5) -> float:
    """Throughput of ``hash_rows`` over raw sha256 of the same bytes in ``threads`` threads (1.0 = par).

    The two runs alternate and each keeps its best, so background load hits both alike.
    """
    matrix = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    cid = bytes(16)
    bounds = [rows * k // threads for k in range(threads + 1)]

    def raw_block(r0: int, r1: int) -> None:
        for i in range(r0, r1):
            hashlib.sha256(matrix[i].data).digest()

    with ThreadPoolExecutor(max_workers=threads) as pool:

        def raw() -> None:
            list(pool.map(lambda k: raw_block(bounds[k], bounds[k + 1]), range(threads)))

        def merkle() -> None:
            hash_rows(cid, 0, matrix, threads)

        raw()  # warm-up: threads, first touch
        merkle()
        raw_s, merkle_s = [], []
        for _ in range(max(1, repeats)):
            raw_s.append(_best(raw, 1))
            merkle_s.append(_best(merkle, 1))
    return min(raw_s) / min(merkle_s)


def gpu_generator_gbs(precision: str = "fp16", rows: int = 8192, cols: int = 65536, repeats: int = 5) -> dict:
    """Fused-kernel write rate on the current CUDA device: GB/s and elements/s."""
    import torch

    from compute.pog.gpu_gen import fill_block

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[precision]
    out = torch.empty((rows, cols), dtype=dtype, device="cuda")
    backend = fill_block(out, 1, 2, 0, 0, precision)
    torch.cuda.synchronize()

    def run() -> None:
        fill_block(out, 3, 4, 0, 0, precision)
        torch.cuda.synchronize()

    seconds = _best(run, repeats)
    return {
        "generator_backend": backend,
        "generator_gbs": out.numel() * out.element_size() / seconds / 1e9,
        "generator_gelem_s": out.numel() / seconds / 1e9,
    }


# INT32 instructions per second of an H100 SXM: 132 SMs x 64 INT32 lanes x 1.83 GHz. Version 1 of
# the generator reached 775 G elements/s there at ~20 integer instructions each: the same rate.
H100_INT32_OPS_S = 132 * 64 * 1.83e9


def roofline(
    tflops: float,
    bandwidth_gbs: float,
    m: int,
    n: int,
    p: int,
    precision: str = "fp16",
    int_ops_s: float = H100_INT32_OPS_S,
) -> dict[str, float]:
    """Commit/GEMM estimate: (generation time + GEMM flops / throughput) / GEMM time.

    Generation of (m*n + n*p) elements takes the longer of its stores (bytes per element at the
    table's bandwidth) and its integer instructions (at ``int_ops_s``); serial sum, no overlap
    credited, against 2*m*n*p at the table's (PoG-calibrated) throughput.
    """
    elements = m * n + n * p
    per_elem = GEN_BYTES_PER_ELEM[precision]
    store_s = per_elem * elements / (bandwidth_gbs * 1e9)
    alu_s = GEN_INT_OPS_PER_ELEM[precision] * elements / int_ops_s
    gemm_s = 2.0 * m * n * p / (tflops * 1e12)
    return {
        "gpu_generator_bytes_per_elem": per_elem,
        "gpu_generator_int_ops_per_elem": GEN_INT_OPS_PER_ELEM[precision],
        "roofline_commit_gemm": (max(store_s, alu_s) + gemm_s) / gemm_s,
    }


def generator_figures(device: str, threads: int, n: int | None = None) -> dict:
    """CPU generator and Merkle speed in ``threads`` threads; the GPU generator on CUDA, else its roofline
    at the reference GPU's validator shape (inner size ``n``: the verify figures' n by default)."""
    from compute.lab.bench.pog_verify import reference_model, validator_n

    tflops, bandwidth = reference_model()
    figures: dict = {
        "generator_ns_per_elem_cpu": generator_ns_per_elem_cpu(threads),
        "generator_backend_cpu": cpu_generator_backend(4096 * 4096 // max(1, threads)),
        "merkle_vs_sha256": merkle_vs_sha256(threads),
    }
    line = roofline(tflops, bandwidth, 8192, n or validator_n(tflops), 8192, "fp16")
    figures["gpu_generator_bytes_per_elem"] = line["gpu_generator_bytes_per_elem"]
    figures["gpu_generator_int_ops_per_elem"] = line["gpu_generator_int_ops_per_elem"]
    figures["roofline_commit_gemm_h100_fp16"] = line["roofline_commit_gemm"]
    if device == "cuda":
        figures.update(gpu_generator_gbs("fp16"))
    return figures


def main(argv: list[str] | None = None) -> int:
    import argparse
    import os

    from compute.lab.report import emit

    parser = argparse.ArgumentParser(
        prog="python -m compute bench pog-gen", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="cuda adds the GPU generator"
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (all cores)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)
    threads = args.threads or os.cpu_count() or 1
    emit(generator_figures(args.device, threads), args.json, f"Proof-of-GPU generator ({threads} threads)")
    return 0
