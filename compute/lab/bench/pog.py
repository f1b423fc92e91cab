"""Benchmark of the PoG engine: prover overhead over a plain GEMM, and verification cost.

``run_bench`` times, in one process on one device: a plain product of pre-generated full A and B
(``gemm_s``), the full prover commit (generation + chunked GEMM + hashing, ``commit_s``) and the
verification of the default opening. ``verify_at_n`` times verification of a synthetic honest
opening at a large n (e.g. 2**20) without computing the full product: only the sampled rows are
computed, exactly, so the cost measured is the verifier's. Figures are advisory; no I/O here.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from compute.lab.bench.pog_gen import generator_figures
from compute.lab.bench.pog_verify import measure_verify, verify_suite
from compute.pog.challenge import choose_openings, new_challenge
from compute.pog.generator import MATRIX_A, MATRIX_B, PRECISION_BITS, matrix_block_np, subkey
from compute.pog.prover import Prover
from compute.pog.verifier import verify
from compute.pog.wire import Precision


@dataclass(frozen=True)
class BenchResult:
    device: str
    precision: str
    m: int
    n: int
    p: int
    gemm_s: float
    commit_s: float
    overhead_ratio: float
    tflops: float
    verify_s: float
    verified_entries: int
    verify_s_per_entry: float
    verify_n: int | None = None
    verify_n_s: float | None = None
    repeats: int = 1
    threads: int = 1
    extra: dict | None = None  # the issue-13 figures (verify_h100_fp16_*, generator, merkle, roofline)

    def as_dict(self) -> dict:
        data = asdict(self)
        data.update(data.pop("extra") or {})
        return data


GPU_FULL_OPERANDS_BYTES = 16e9  # above this the GPU baseline reuses one slab pair (the chunked GEMM)


def _plain_gemm_cuda(challenge):
    """The GEMM alone on the GPU: full pre-generated A @ B, or at large n the same chunked addmm loop
    the prover runs over one pre-generated slab pair (so the ratio isolates generation and hashing)."""
    import torch

    from compute.pog.cuda_product import accumulate
    from compute.pog.gpu_gen import fill_block

    m, n, p, chunk = challenge.m, challenge.n, challenge.p, challenge.chunk
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[challenge.precision]
    full = (m * n + n * p) * torch.finfo(dtype).bits / 8 <= GPU_FULL_OPERANDS_BYTES
    width = n if full else chunk
    a = torch.empty((m, width), dtype=dtype, device="cuda")
    b = torch.empty((width, p), dtype=dtype, device="cuda")
    fill_block(a, 1, 2, 0, 0, challenge.precision)
    fill_block(b, 3, 4, 0, 0, challenge.precision)
    out = torch.zeros((m, p), dtype=torch.float32, device="cuda")

    def run() -> None:
        if full and dtype == torch.float32:
            torch.mm(a, b, out=out)
        elif full:
            torch.mm(a, b, out_dtype=torch.float32, out=out)
        else:
            for _ in range(0, n, chunk):
                accumulate(out, a, b)
        torch.cuda.synchronize()

    return run


def _plain_gemm(challenge, device: str):
    """A zero-argument callable running the plain product of pre-generated full A and B."""
    if device == "cuda":
        return _plain_gemm_cuda(challenge)
    bits = PRECISION_BITS[challenge.precision]
    key = subkey(bytes.fromhex(challenge.key), 0)
    a = matrix_block_np(key, MATRIX_A, bits, (0, challenge.m), (0, challenge.n))
    b = matrix_block_np(key, MATRIX_B, bits, (0, challenge.n), (0, challenge.p))
    try:
        import torch
    except ImportError:
        return lambda: np.matmul(a, b)
    at, bt = torch.from_numpy(a).clone(), torch.from_numpy(b).clone()  # torch's 64-byte alignment
    return lambda: torch.mm(at, bt)


def _timed(fn) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def verify_at_n(
    precision: Precision, n: int, m: int = 4096, p: int = 4096, rows: int = 8, cols: int = 4
) -> float:
    """CPU seconds to verify one GPU's default opening at inner size ``n`` (synthetic honest rows)."""
    return measure_verify(precision, n, rows=rows, cols=cols).cpu_s


def _phases(timing, challenge, device: str) -> dict:
    """Where the best commit's time went (the prover's own split) and, on CUDA, generation alone."""
    figures = {}
    if timing is not None:
        figures = {"commit_compute_s": timing.compute_s, "commit_hash_s": timing.hash_s}
    if device == "cuda":
        figures["generation_only_s"] = _generation_only_cuda(challenge)
    return figures


def _generation_only_cuda(challenge) -> float:
    """Seconds to generate every slab of A and B of the challenge with the fused kernel, nothing else."""
    import torch

    from compute.pog.gpu_gen import fill_block

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[challenge.precision]
    a = torch.empty((challenge.m, challenge.chunk), dtype=dtype, device="cuda")
    b = torch.empty((challenge.chunk, challenge.p), dtype=dtype, device="cuda")
    torch.cuda.synchronize()
    started = time.perf_counter()
    for t0 in range(0, challenge.n, challenge.chunk):
        fill_block(a, 1, 2, 0, t0, challenge.precision)
        fill_block(b, 3, 4, t0, 0, challenge.precision)
    torch.cuda.synchronize()
    return time.perf_counter() - started


def reference_figures(device: str, threads: int, verify_tflops: float | None) -> dict:
    """Verifier cost at the reference GPU's shape, CPU generator/Merkle speed, GPU generator or roofline."""
    figures = verify_suite(verify_tflops, precisions=("fp16",))
    figures.update(generator_figures(device, threads, figures["verify_h100_fp16_n"]))
    return figures


def run_bench(
    device: str = "auto",
    precision: Precision = "fp32",
    m: int = 4096,
    n: int = 4096,
    p: int = 4096,
    verify_n: int | None = None,
    repeats: int = 5,
    threads: int | None = None,
    verify_tflops: float | None = None,
) -> BenchResult:
    """Best of ``repeats`` interleaved runs of the plain GEMM and the full commit, after a warm-up.

    Interleaving exposes both to the same background load; the minimum is the least disturbed run.
    ``verify_tflops`` overrides the reference GPU's throughput that sizes the verify figures' n.
    """
    prover = Prover(device, threads)
    threads = prover.threads
    challenge = new_challenge(precision, m, n, p, 1)
    gemm = _plain_gemm(challenge, prover.device)
    gemm()  # warm-up: thread pools, allocator, (CUDA) kernels
    prover.warm_up(challenge)  # as the validator does: buffers, thread pools, the CPU kernel's JIT compile
    gemm_times, commit_times, phases = [], [], []
    for _ in range(max(1, repeats)):
        gemm_times.append(_timed(gemm)[0])
        elapsed, commitment = _timed(lambda: prover.commit(challenge))
        commit_times.append(elapsed)
        phases.append(commitment.timings.per_gpu[0] if commitment.timings else None)
    gemm_s, commit_s = min(gemm_times), min(commit_times)
    request = choose_openings(challenge)
    opening = prover.open(request)
    started = time.perf_counter()
    verdict = verify(challenge, commitment, request, opening)
    verify_s = time.perf_counter() - started
    if not verdict.ok:
        raise RuntimeError(f"honest benchmark round failed verification: {verdict.reasons}")
    entries = sum(len(c) for per_gpu in request.cols for c in per_gpu)
    return BenchResult(
        device=prover.device,
        precision=precision,
        m=m,
        n=n,
        p=p,
        gemm_s=gemm_s,
        commit_s=commit_s,
        overhead_ratio=commit_s / gemm_s,
        tflops=2.0 * m * n * p / commit_s / 1e12,
        verify_s=verify_s,
        verified_entries=entries,
        verify_s_per_entry=verify_s / entries,
        verify_n=verify_n,
        verify_n_s=None if verify_n is None else verify_at_n(precision, verify_n),
        repeats=max(1, repeats),
        threads=int(threads),
        extra={
            **_phases(phases[commit_times.index(commit_s)], challenge, prover.device),
            **reference_figures(prover.device, int(threads), verify_tflops),
        },
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    from compute.lab.report import emit

    parser = argparse.ArgumentParser(prog="python -m compute bench pog", description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--precision", choices=("fp16", "bf16", "fp32"), default="fp32")
    parser.add_argument("--m", type=int, default=4096)
    parser.add_argument("--n", type=int, default=4096, help="inner size (4096)")
    parser.add_argument("--p", type=int, default=4096)
    parser.add_argument(
        "--verify-n", type=int, default=None, help="also time verification at this inner size"
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="interleaved GEMM/commit runs; best of each (5)"
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads of the prover (all cores)")
    parser.add_argument(
        "--verify-tflops",
        type=float,
        default=None,
        help="throughput that sizes n of the verify_h100_fp16_* figures (default: H100 SXM fp16 from the table)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)
    result = run_bench(
        args.device,
        args.precision,
        args.m,
        args.n,
        args.p,
        args.verify_n,
        args.repeat,
        threads=args.threads,
        verify_tflops=args.verify_tflops,
    )
    title = f"Proof-of-GPU benchmark ({result.device}, {result.precision}, {result.m}x{result.n}x{result.p})"
    emit(result.as_dict(), args.json, title)
    return 0
