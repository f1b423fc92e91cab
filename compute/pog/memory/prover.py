"""Memory proof v2, prover side: build A per GPU, run the lockstep passes, stream leaves, open passes.

Two worker steps. ``memory_build`` (no start nonce): every GPU builds its keyed uint32 matrix A
(``kernel.elements_*``, ``hash_rounds`` rounds per element) and keeps it resident. ``memory_commit``
brings the validator's start nonce: ``passes`` dependent passes run on all GPUs at once, pass r on
every GPU before pass r + 1 on any (the step of pass r needs the word of all GPUs' pass-r leaves).
Each ``y_r`` is hashed into a leaf; the pass's leaves are streamed at once through ``emit``, one
line per GPU in one write; opening a pass returns the
full ``y_{r-1}`` and ``y_r``. The same engine on device ``cpu`` proves host RAM.

Plain dicts validated with plain code, stdlib + numpy (+ torch): embedded in the worker script. It
does not choose challenges, time anything that matters, or verify (see ``memory.verify``).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..engine import EngineError, _hex_field, _int_field
from .cpu_kernel import MEM_FUSED_MIN, elements_cpu, product_cpu_rows
from .kernel import (
    MAX_HASH_ROUNDS,
    MAX_MEM_N,
    MAX_PASSES,
    elements_torch,
    lockstep_word,
    next_x,
    pass_leaf,
    pass_offsets,
    product_torch,
    round_keys,
    start_vector,
)


def encode_vector(values: np.ndarray) -> dict:
    data = np.ascontiguousarray(values, dtype="<u4")
    return {"dtype": "<u4", "shape": [int(data.shape[0])], "data": base64.b64encode(data.tobytes()).decode()}


@dataclass(frozen=True)
class MemorySpec:
    challenge_id: str
    key: str
    n: int
    passes: int
    hash_rounds: int
    gpu_count: int
    start: str = ""  # hex nonce of memory_commit, unknown while A is built

    @property
    def id_bytes(self) -> bytes:
        return bytes.fromhex(self.challenge_id)

    @property
    def matrix_bytes(self) -> int:
        return 4 * self.n * self.n


def parse_memory_challenge(obj: object) -> MemorySpec:
    if not isinstance(obj, dict):
        raise EngineError("memory challenge must be an object")
    return MemorySpec(
        challenge_id=_hex_field(obj, "challenge_id", 32),
        key=_hex_field(obj, "key", 32),
        n=_int_field(obj, "n", 1, MAX_MEM_N),
        passes=_int_field(obj, "passes", 2, MAX_PASSES),
        hash_rounds=_int_field(obj, "hash_rounds", 1, MAX_HASH_ROUNDS),
        gpu_count=_int_field(obj, "gpu_count", 1, 16),
    )


PASS_THREADS_MIN = 1 << 22  # elements of A from which a CPU pass is split across the cores


def _block_rows(n: int, budget_bytes: int = 16 << 20) -> int:
    """Rows per build block (one fused-kernel shape per n on CUDA; in-cache on CPU)."""
    return max(1, min(n, budget_bytes // (8 * n)))


class MemoryEngine:
    """Builds A per GPU once, runs the lockstep passes, streams leaves, opens passes.

    ``build`` and ``multiply`` are the two steps a cheating prover would change (the soundness tests
    subclass them); everything else is bookkeeping.
    """

    def __init__(self, device: str = "cpu", threads: int | None = None) -> None:
        self.device = device
        self.threads = threads or os.cpu_count() or 1
        self._spec: MemorySpec | None = None
        self._built: MemorySpec | None = None
        self._vectors: list[list[np.ndarray]] = []
        self._matrices: list = []
        self._pass_pool: ThreadPoolExecutor | None = None

    # -- the two honest steps -------------------------------------------------------------------
    def build(self, spec: MemorySpec, gpu: int):
        """A (n x n uint32) for one GPU: numpy on CPU, an int32 tensor on ``cuda:gpu``."""
        keys = round_keys(bytes.fromhex(spec.key), gpu, spec.hash_rounds)
        if self.device == "cuda":
            import torch

            device = torch.device("cuda", gpu)
            keys_t = torch.from_numpy(keys.view(np.int32).copy()).to(device)  # once, not per block
            a_t = torch.empty((spec.n, spec.n), dtype=torch.int32, device=device)
            cols = torch.arange(spec.n, dtype=torch.int64, device=device)
            step = _block_rows(spec.n, 128 << 20)
            for r0 in range(0, spec.n, step):  # full blocks only: one kernel shape per n
                rows = torch.arange(r0, r0 + step, dtype=torch.int64, device=device)
                block = elements_torch(rows, cols, keys_t, compiled=True)
                a_t[r0 : r0 + step] = block[: min(step, spec.n - r0)]
            torch.cuda.synchronize(device)
            return a_t
        step = _block_rows(spec.n)
        a = np.empty((spec.n, spec.n), dtype=np.uint32)
        cols_np = np.arange(spec.n, dtype=np.uint32)
        fused = spec.n * spec.n * spec.hash_rounds >= MEM_FUSED_MIN  # big builds: numba, when present

        def fill(r0: int) -> None:
            rows_np = np.arange(r0, min(spec.n, r0 + step), dtype=np.uint32)
            a[r0 : r0 + step] = elements_cpu(rows_np, cols_np, keys, fused)

        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            list(pool.map(fill, range(0, spec.n, step)))
        return a

    def multiply(self, spec: MemorySpec, gpu: int, a, x: np.ndarray) -> np.ndarray:
        """y = A @ x mod 2^32; returns uint32 numpy. On the CPU every core reads its rows of A."""
        if self.device == "cuda":
            return product_torch(a, x)
        fused = spec.n * spec.n * spec.hash_rounds >= MEM_FUSED_MIN  # the build compiled the kernels
        if self.threads == 1 or a.size < PASS_THREADS_MIN:
            return product_cpu_rows(a, x, fused)
        if self._pass_pool is None:
            self._pass_pool = ThreadPoolExecutor(max_workers=self.threads)  # kept: one pass is milliseconds
        step = -(-a.shape[0] // self.threads)
        rows = range(0, a.shape[0], step)
        return np.concatenate(
            list(self._pass_pool.map(lambda r0: product_cpu_rows(a[r0 : r0 + step], x, fused), rows))
        )

    # -- bookkeeping ----------------------------------------------------------------------------
    def _pool(self, spec: MemorySpec) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=spec.gpu_count)

    def prepare(self, challenge: object) -> dict:
        """Build A on every GPU (concurrently) and keep it resident for ``commit``."""
        spec = parse_memory_challenge(challenge)
        self._spec, self._vectors, self._matrices, self._built = None, [], [None] * spec.gpu_count, spec

        def build(gpu: int) -> float:
            started = time.perf_counter()
            self._matrices[gpu] = self.build(spec, gpu)
            return time.perf_counter() - started

        with self._pool(spec) as pool:
            build_s = list(pool.map(build, range(spec.gpu_count)))
        return {"challenge_id": spec.challenge_id, "build_s": build_s}

    def _chain(self, spec: MemorySpec, emit) -> list[list[np.ndarray]]:
        """All GPUs' passes in lockstep: pass r everywhere, then the shared word, then pass r + 1."""
        key, start, gpus = bytes.fromhex(spec.key), bytes.fromhex(spec.start), range(spec.gpu_count)
        xs = [start_vector(key, start, g, spec.n) for g in gpus]
        vectors: list[list[np.ndarray]] = [[] for _ in gpus]
        with self._pool(spec) as pool:
            for r in range(1, spec.passes + 1):

                def one(g: int, r: int = r, xs: list[np.ndarray] = xs) -> bytes:
                    y = np.asarray(self.multiply(spec, g, self._matrices[g], xs[g]), dtype=np.uint32)
                    vectors[g].append(y)
                    return pass_leaf(spec.id_bytes, g, r, y)

                leaves = list(pool.map(one, gpus))
                # every GPU's pass-r line in one write: pass r + 1 starts on no GPU before the last
                # pass-r leaf, so an earlier GPU's line gains nothing by leaving alone, and the
                # validator's timing process decrypts one SSH packet per pass instead of one per GPU
                emit(
                    [
                        {"ok": True, "op": "memory_pass", "gpu": g, "pass": r, "leaf": leaf.hex()}
                        for g, leaf in enumerate(leaves)
                    ]
                )
                if r < spec.passes:
                    word = lockstep_word(leaves)
                    xs = [next_x(vectors[g][-1], pass_offsets(key, start, g, r, spec.n), word) for g in gpus]
        return vectors

    def commit(self, request: object, emit=None) -> dict:
        """Run the chain from ``request["start"]`` on the resident A; ``emit(lines)`` gets each
        pass's lines (one per GPU, in GPU order) as soon as the pass is done on every GPU."""
        built = self._built
        if built is None:
            raise EngineError("nothing built: send memory_build before memory_commit")
        if not isinstance(request, dict) or request.get("challenge_id") != built.challenge_id:
            raise EngineError("memory commit request does not match the built challenge")
        spec = dataclasses.replace(built, start=_hex_field(request, "start", 32))
        self._built = None
        started = time.perf_counter()
        self._vectors = self._chain(spec, emit or (lambda line: None))
        self._spec, self._matrices = spec, []
        leaves = [
            [pass_leaf(spec.id_bytes, g, r + 1, y).hex() for r, y in enumerate(vs)]
            for g, vs in enumerate(self._vectors)
        ]
        return {"challenge_id": spec.challenge_id, "leaves": leaves, "chain_s": time.perf_counter() - started}

    def open(self, request: object) -> dict:
        """Full vectors y_{r-1} (when r > 1) and y_r for each requested pass r of each GPU."""
        spec = self._spec
        if spec is None:
            raise EngineError("nothing committed: send memory_commit before memory_open")
        if not isinstance(request, dict) or request.get("challenge_id") != spec.challenge_id:
            raise EngineError("memory opening request does not match the committed challenge")
        passes = request.get("passes")
        if not isinstance(passes, list) or len(passes) != spec.gpu_count:
            raise EngineError(f"passes must list {spec.gpu_count} index lists")
        per_gpu = []
        for gpu, wanted in enumerate(passes):
            if not isinstance(wanted, list) or not 1 <= len(wanted) <= 16:
                raise EngineError("each GPU must open 1..16 passes")
            needed: set[int] = set()
            for r in wanted:
                if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= spec.passes:
                    raise EngineError(f"pass index must be an integer in [1, {spec.passes}]")
                needed.update({r, r - 1} - {0})
            ordered = sorted(needed)
            vectors = [encode_vector(self._vectors[gpu][r - 1]) for r in ordered]
            per_gpu.append({"indices": ordered, "vectors": vectors})
        return {"challenge_id": spec.challenge_id, "per_gpu": per_gpu}
