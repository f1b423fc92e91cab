"""Prover engine: chunked keyed GEMM with fp32 accumulation, Merkle commitment, openings.

Works on plain JSON-like dicts validated with plain code (no pydantic), so the very same code
runs inside the self-contained worker script (stdlib + numpy, torch when present) and behind the
typed ``Prover`` facade. Per GPU it generates A (m x n) and B (n x p) in slabs along n, multiplies
each slab in the challenge precision with fp32 accumulation, discards the slab, hashes the rows of
C and keeps C and its tree in memory for the opening.

Numerics by device:
- cuda (``cuda_product.py``): inputs generated on the device by the fused kernel in the challenge
  dtype on a side stream, overlapped with the GEMM; fp16/bf16 slabs multiplied with
  ``torch.addmm(..., out_dtype=torch.float32)`` (fp32 partial products, never rounded to 16 bits);
  fp32 with TF32 and reduced-precision reductions disabled.
- cpu: inputs generated in threads (between GEMMs) directly as float32 (``cpu_gen``: the fused numba
  kernel at large shapes when numba is installed, else numpy); the
  values are exact in every challenge precision, so an fp32 GEMM is an honest answer for all three.
It does not hash anything but C, choose openings, or verify.
"""

from __future__ import annotations

import base64
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from .cpu_gen import fill_cpu_block
from .cuda_product import product_on_device, warm_up
from .generator import (
    MATRIX_A,
    MATRIX_B,
    PRECISION_BITS,
    index_values,
    matrix_seeds,
    subkey,
)
from .merkle import MerkleTree, hash_rows

MAX_DIM = 65536
MAX_N = 1 << 26
MAX_GPUS = 16
MAX_CHUNK = 1 << 16
MAX_OUTPUT_ELEMENTS = 1 << 28
MAX_OPEN_ROWS = 64
MAX_OPEN_COLS = 64
DEFAULT_CHUNK = 4096
_HEX = set("0123456789abcdef")


class EngineError(ValueError):
    """A request the engine refuses (bad fields, wrong challenge, impossible device)."""


@dataclass(frozen=True)
class ChallengeSpec:
    challenge_id: str
    key: str
    precision: str
    m: int
    n: int
    p: int
    gpu_count: int
    chunk: int

    @property
    def id_bytes(self) -> bytes:
        return bytes.fromhex(self.challenge_id)

    @property
    def key_bytes(self) -> bytes:
        return bytes.fromhex(self.key)


def _hex_field(obj: dict, name: str, length: int) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or len(value) != length or not set(value) <= _HEX:
        raise EngineError(f"{name} must be {length} lowercase hex characters")
    return value


def _int_field(obj: dict, name: str, low: int, high: int) -> int:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EngineError(f"{name} must be an integer in [{low}, {high}]")
    return value


def parse_challenge(obj: object) -> ChallengeSpec:
    """Validate a challenge dict (the wire ``Challenge`` fields) with plain code."""
    if not isinstance(obj, dict):
        raise EngineError("challenge must be an object")
    if obj.get("precision") not in PRECISION_BITS:
        raise EngineError(f"precision must be one of {sorted(PRECISION_BITS)}")
    spec = ChallengeSpec(
        challenge_id=_hex_field(obj, "challenge_id", 32),
        key=_hex_field(obj, "key", 32),
        precision=obj["precision"],
        m=_int_field(obj, "m", 1, MAX_DIM),
        n=_int_field(obj, "n", 1, MAX_N),
        p=_int_field(obj, "p", 1, MAX_DIM),
        gpu_count=_int_field(obj, "gpu_count", 1, MAX_GPUS),
        chunk=_int_field(obj, "chunk", 1, MAX_CHUNK),
    )
    if spec.m * spec.p > MAX_OUTPUT_ELEMENTS:
        raise EngineError(f"m*p must be at most {MAX_OUTPUT_ELEMENTS}")
    return spec


def parse_open_request(obj: object, spec: ChallengeSpec) -> list[list[int]]:
    """Validate an opening request against the committed challenge; returns rows per GPU."""
    if not isinstance(obj, dict) or obj.get("challenge_id") != spec.challenge_id:
        raise EngineError("opening request does not match the committed challenge")
    rows = obj.get("rows")
    if not isinstance(rows, list) or len(rows) != spec.gpu_count:
        raise EngineError(f"rows must list {spec.gpu_count} index lists")
    for per_gpu in rows:
        if not isinstance(per_gpu, list) or not 1 <= len(per_gpu) <= MAX_OPEN_ROWS:
            raise EngineError(f"each GPU must open 1..{MAX_OPEN_ROWS} rows")
        for index in per_gpu:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < spec.m:
                raise EngineError(f"row index must be an integer in [0, {spec.m})")
    return rows


def encode_row(row: np.ndarray) -> dict:
    data = np.ascontiguousarray(row, dtype="<f4")
    return {
        "dtype": "<f4",
        "shape": [int(data.shape[0])],
        "data": base64.b64encode(data.tobytes()).decode("ascii"),
    }


def _chunks(n: int, chunk: int) -> list[tuple[int, int]]:
    return [(t0, min(t0 + chunk, n)) for t0 in range(0, n, chunk)]


def _seeds(spec: ChallengeSpec, gpu: int) -> tuple[tuple[int, int], tuple[int, int]]:
    key = subkey(spec.key_bytes, gpu)
    return matrix_seeds(key, MATRIX_A), matrix_seeds(key, MATRIX_B)


def aligned_empty(shape: tuple[int, int], align: int = 64) -> np.ndarray:
    """An uninitialised float32 array whose data starts on an ``align``-byte boundary.

    numpy aligns large arrays to 16 bytes; MKL's SGEMM writing into (or reading from) such a
    buffer ran ~8 % slower here than on 64-byte aligned memory, as torch allocates it.
    """
    count = int(np.prod(shape))
    raw = np.empty(count * 4 + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset : offset + count * 4].view(np.float32).reshape(shape)


class Scratch:
    """Float32 buffers kept between commits, by name and shape.

    Fresh multi-hundred-MB arrays cost a page fault per 4 KiB on first touch, taken while the GEMM
    runs; reusing them keeps the prover's overhead over a plain GEMM to generation and hashing.
    Only reused once the previous commitment is discarded (``ProverEngine.commit`` does that first).
    """

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, int]) -> np.ndarray:
        array = self._arrays.get(name)
        if array is None or array.shape != shape:
            self._arrays.pop(name, None)  # free the old one before allocating its successor
            array = self._arrays[name] = aligned_empty(shape)
        return array

    def clear(self) -> None:
        self._arrays.clear()


def product_cpu(
    spec: ChallengeSpec,
    gpu: int,
    threads: int,
    use_torch: bool,
    scratch: Scratch | None = None,
    reuse_output: bool = False,
) -> np.ndarray:
    """C = A @ B for one GPU's sub-challenge on the CPU (numpy slabs in threads, fp32 GEMM).

    Slabs always come from ``scratch``; C does too only with ``reuse_output`` (the caller has
    dropped the previous C: a kept output must never be overwritten by the next product).
    """
    scratch = scratch or Scratch()
    bits = PRECISION_BITS[spec.precision]
    (a_rs, a_cs), (b_rs, b_cs) = _seeds(spec, gpu)
    row_a, col_b = index_values(a_rs, 0, spec.m), index_values(b_cs, 0, spec.p)
    m, p, pieces = spec.m, spec.p, max(1, threads)

    def submit(pool: ThreadPoolExecutor, t0: int, t1: int):
        col_a, row_b = index_values(a_cs, t0, t1 - t0), index_values(b_rs, t0, t1 - t0)
        # one slab pair suffices: the next slab is generated only after the GEMM that reads this one
        a = scratch.take(f"a{t1 - t0}", (m, t1 - t0))
        b = scratch.take(f"b{t1 - t0}", (t1 - t0, p))
        futures = []
        for k in range(pieces):
            r0, r1 = m * k // pieces, m * (k + 1) // pieces
            futures.append(pool.submit(fill_cpu_block, row_a[r0:r1], col_a, bits, a[r0:r1]))
            s0, s1 = (t1 - t0) * k // pieces, (t1 - t0) * (k + 1) // pieces
            futures.append(pool.submit(fill_cpu_block, row_b[s0:s1], col_b, bits, b[s0:s1]))
        return a, b, futures

    acc = scratch.take(f"c{gpu}", (m, p)) if reuse_output else aligned_empty((m, p))
    chunks = _chunks(spec.n, spec.chunk)
    tmp = scratch.take("tmp", (m, p)) if len(chunks) > 1 else None
    if use_torch:
        import torch

        acc_t = torch.from_numpy(acc)
        tmp_t = torch.from_numpy(tmp) if tmp is not None else None
    with ThreadPoolExecutor(max_workers=pieces) as pool:
        pending = submit(pool, *chunks[0])
        for k in range(len(chunks)):
            a, b, futures = pending
            for future in futures:
                future.result()
            # slab product apart, then one fp32 add: keeps the long sum short (addmm_ into acc
            # saves a pass but its accumulation order cost most of the honest-error margin)
            if use_torch:
                torch.mm(torch.from_numpy(a), torch.from_numpy(b), out=acc_t if k == 0 else tmp_t)
                if k:
                    assert tmp_t is not None  # k > 0 only when there are several chunks
                    acc_t += tmp_t
            else:
                np.matmul(a, b, out=acc if k == 0 else tmp)
                if k:
                    acc += tmp
            # generation of the next slab starts after the GEMM: overlapping numpy threads with
            # the BLAS thread pool oversubscribes a small CPU and slowed the product 2-3x here
            if k + 1 < len(chunks):
                pending = submit(pool, *chunks[k + 1])
    return acc


def product_cuda(spec: ChallengeSpec, gpu: int, device_index: int) -> np.ndarray:
    """C = A @ B for one GPU's sub-challenge, generated and multiplied on ``cuda:device_index``."""
    shape = (spec.m, spec.n, spec.p)
    return product_on_device(
        spec.precision, shape, _chunks(spec.n, spec.chunk), _seeds(spec, gpu), device_index
    )


def _torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when torch sees a GPU, else 'cpu'; 'cuda' without a GPU is an error."""
    if device not in ("auto", "cpu", "cuda"):
        raise EngineError("device must be auto, cpu or cuda")
    torch = _torch_or_none()
    has_cuda = bool(torch is not None and torch.cuda.is_available())
    if device == "cuda" and not has_cuda:
        raise EngineError("device cuda requested but torch sees no CUDA device")
    return "cuda" if device == "cuda" or (device == "auto" and has_cuda) else "cpu"


@dataclass
class _Committed:
    spec: ChallengeSpec
    outputs: list[np.ndarray]
    trees: list[MerkleTree]


class ProverEngine:
    """Stateful prover: ``commit(challenge dict)`` keeps C per GPU; ``open(request dict)``."""

    def __init__(self, device: str = "auto", threads: int | None = None) -> None:
        self.device = resolve_device(device)
        self.threads = threads or os.cpu_count() or 1
        self._torch = _torch_or_none()
        self._committed: _Committed | None = None
        self._scratch = Scratch()
        self._reuse = False
        if self.device == "cuda":
            backends = self._torch.backends
            backends.cuda.matmul.allow_tf32 = False
            backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
            backends.cudnn.allow_tf32 = False
            warm_up(self._torch.cuda.device_count())  # outside the validator's clock (info, not commit)

    def info(self) -> dict:
        torch = self._torch
        devices = []
        if self.device == "cuda":
            for index in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(index)
                uuid = str(getattr(props, "uuid", "") or "")
                devices.append(
                    {
                        "index": index,
                        "name": props.name,
                        "memory_bytes": int(props.total_memory),
                        "uuid": uuid,
                    }
                )
        else:
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
            devices.append({"index": 0, "name": "cpu", "memory_bytes": int(memory), "uuid": ""})
        return {
            "devices": devices,
            "torch": None if torch is None else str(torch.__version__),
            "cuda": self.device == "cuda",
        }

    def _product(self, spec: ChallengeSpec, gpu: int) -> tuple[np.ndarray, MerkleTree, dict]:
        """C of one GPU and its tree; on CUDA each GPU's thread hashes while other GPUs still multiply."""
        started = time.perf_counter()
        if self.device == "cuda":
            out = product_cuda(spec, gpu, gpu)
        else:
            out = product_cpu(
                spec, gpu, self.threads, self._torch is not None, self._scratch, reuse_output=self._reuse
            )
        hashed = time.perf_counter()
        hash_threads = max(1, self.threads // max(1, spec.gpu_count if self.device == "cuda" else 1))
        tree = MerkleTree(hash_rows(spec.id_bytes, gpu, out, hash_threads))
        timings = {"compute_s": hashed - started, "hash_s": time.perf_counter() - hashed}
        return out, tree, timings

    def commit(self, challenge: object, keep_previous: bool = False) -> dict:
        """Compute every sub-challenge (concurrently on CUDA), commit, and keep C for ``open``.

        ``keep_previous``: a caller that holds on to earlier commitments (sustained segments) asks
        for fresh output buffers; otherwise the previous C is dropped and its memory reused.
        """
        spec = parse_challenge(challenge)
        self._committed = None
        self._reuse = not keep_previous
        started = time.perf_counter()
        gpus = range(spec.gpu_count)
        if self.device == "cuda":
            available = self._torch.cuda.device_count()
            if spec.gpu_count > available:
                raise EngineError(f"challenge asks for {spec.gpu_count} GPUs, this machine has {available}")
            with ThreadPoolExecutor(max_workers=spec.gpu_count) as pool:
                results = list(pool.map(lambda g: self._product(spec, g), gpus))
        else:
            results = [self._product(spec, g) for g in gpus]
        outputs = [out for out, _, _ in results]
        trees = [tree for _, tree, _ in results]
        self._committed = _Committed(spec, outputs, trees)
        return {
            "challenge_id": spec.challenge_id,
            "roots": [tree.root.hex() for tree in trees],
            "timings": {"total_s": time.perf_counter() - started, "per_gpu": [t for _, _, t in results]},
        }

    def warm_up(self, challenge: object) -> dict:
        """Run the first (slow) product at the challenge's shape before the validator's clock starts.

        A fresh worker's first commit pays page faults on its buffers, thread-pool start and (CUDA)
        allocator growth: ~1.3x. This computes two slabs at the same m, p, chunk and GPU count under a
        throwaway key and commits nothing, so the timed commit that follows reuses warm buffers.
        """
        spec = parse_challenge(challenge)
        small = replace(spec, n=min(spec.n, 2 * spec.chunk), key="0" * 32, challenge_id="0" * 32)
        self._committed = None
        self._reuse = True
        started = time.perf_counter()
        for gpu in range(spec.gpu_count):
            self._product(small, gpu)
        return {"warm_s": time.perf_counter() - started}

    def open(self, request: object) -> dict:
        """Rows and Merkle paths for the requested indices of the committed challenge."""
        committed = self._committed
        if committed is None:
            raise EngineError("nothing committed: send commit before open")
        rows = parse_open_request(request, committed.spec)
        per_gpu = []
        for gpu, indices in enumerate(rows):
            out, tree = committed.outputs[gpu], committed.trees[gpu]
            proofs = [
                {"index": i, "row": encode_row(out[i]), "path": [node.hex() for node in tree.path(i)]}
                for i in indices
            ]
            per_gpu.append({"rows": proofs})
        return {"challenge_id": committed.spec.challenge_id, "per_gpu": per_gpu}
