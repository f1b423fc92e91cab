"""Prover side of the in-depth proofs: memory passes, sustained segments, single-device commits.

Plain dicts validated with plain code (no pydantic), stdlib + numpy (+ torch when present), so this
module is embedded verbatim in the worker script next to ``engine.py`` and reuses its generator,
Merkle and GEMM code.

Memory challenge (one per GPU, key ``subkey(key, gpu)``), in two steps. ``memory_build``: a square
matrix A (n x n, fp32) whose every element costs ``hash_rounds`` rounds of the splitmix64 finaliser
to regenerate; the prover builds A once and keeps it resident. ``memory_commit`` then brings the
validator's fresh ``start`` nonce, sent only after the build reply: ``passes`` dependent passes
``y_r = A @ x_{r-1}`` with ``x_0`` and the offsets derived from key and start, and
``x_r = tanh(3 y_r / sqrt(n) + c_r)``, ``c_r`` a keyed offset vector per pass (nonlinear: passes
cannot be batched or collapsed into a power of A; keyed: no vector, zero included, is a fixed point,
so the chain cannot collapse into one that skips A; started by the nonce: nothing of the chain can
be computed while the build is running, so regenerating A per pass cannot hide inside a slow build).
Each ``y_r`` is hashed into a leaf and streamed at once through ``emit`` (the validator times the
arrivals from its start send); the commitment lists every leaf per GPU. Opening a pass returns the
full vectors ``y_{r-1}`` and ``y_r``.

It does not choose challenges, time anything that matters, or verify (see ``memory.py``).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .engine import (
    EngineError,
    ProverEngine,
    _Committed,
    _hex_field,
    _int_field,
    parse_challenge,
    product_cpu,
    product_cuda,
)
from .generator import (
    _U27,
    _U30,
    _U31,
    _UMIX1,
    _UMIX2,
    MIX1,
    MIX2,
    _signed64,
    index_values,
    matrix_seeds,
    subkey,
)
from .host_probe import run_probe
from .merkle import MerkleTree, hash_rows, leaf_hash

MEM_VERSION = b"compute-pog-mem/2"
MEM_MATRIX = 2
MEM_BITS = 24
MAX_MEM_N = 1 << 18
MAX_PASSES = 256
MAX_HASH_ROUNDS = 1024
MAX_SEGMENTS = 1024
NONLINEAR_GAIN = 3.0
_PIECE = 1 << 15  # elements per in-cache piece of the expensive generator


def round_constant(k: int) -> int:
    """Per-round additive constant (odd, distinct per round) of the expensive element hash."""
    return (0x632BE59BD9B4E019 * (2 * k + 1)) & ((1 << 64) - 1)


def expensive_block_np(row_vals: np.ndarray, col_vals: np.ndarray, rounds: int) -> np.ndarray:
    """Float32 block of A: ``rounds`` finaliser rounds on ``row + col``, top 24 bits -> [-1, 1).

    Works through the block in pieces of ``_PIECE`` elements so the uint64 temporaries stay in the
    cache across all rounds (several times faster than whole-block passes)."""
    z_all = np.add(row_vals[:, None], col_vals[None, :]).reshape(-1)
    tmp_all = np.empty(min(_PIECE, z_all.size), dtype=np.uint64)
    constants = [np.uint64(round_constant(k)) for k in range(rounds)]
    with np.errstate(over="ignore"):
        for start in range(0, z_all.size, _PIECE):
            z = z_all[start : start + _PIECE]
            tmp = tmp_all[: z.size]
            for constant in constants:
                z += constant
                np.right_shift(z, _U30, out=tmp)
                z ^= tmp
                z *= _UMIX1
                np.right_shift(z, _U27, out=tmp)
                z ^= tmp
                z *= _UMIX2
                np.right_shift(z, _U31, out=tmp)
                z ^= tmp
    z_all >>= np.uint64(64 - MEM_BITS)
    out = z_all.view(np.int64).astype(np.float32).reshape(len(row_vals), len(col_vals))
    out *= np.float32(2.0 ** -(MEM_BITS - 1))
    out -= np.float32(1.0)
    return out


def expensive_block_torch(row_vals, col_vals, rounds: int):  # int64 tensors -> float32 tensor
    """Torch twin of ``expensive_block_np`` (masked logical shifts on int64), bit-identical."""
    import torch

    z = row_vals[:, None] + col_vals[None, :]
    for k in range(rounds):
        z += _signed64(round_constant(k))
        z ^= (z >> 30) & ((1 << 34) - 1)
        z *= _signed64(MIX1)
        z ^= (z >> 27) & ((1 << 37) - 1)
        z *= _signed64(MIX2)
        z ^= (z >> 31) & ((1 << 33) - 1)
    k24 = (z >> (64 - MEM_BITS)) & ((1 << MEM_BITS) - 1)
    return k24.to(torch.float32).mul_(2.0 ** -(MEM_BITS - 1)).sub_(1.0)


def memory_seeds(key: bytes, gpu: int) -> tuple[int, int]:
    """(row seed, column seed) of one GPU's memory matrix."""
    gpu_key = subkey(hashlib.blake2b(MEM_VERSION + key, digest_size=16).digest(), gpu)
    return matrix_seeds(gpu_key, MEM_MATRIX)


def chain_seeds(key: bytes, start: bytes, gpu: int) -> tuple[int, int]:
    """(x_0 seed, offsets seed) of one GPU's chain: from the key and the start nonce."""
    gpu_key = subkey(hashlib.blake2b(MEM_VERSION + key, digest_size=16).digest(), gpu)
    seeds = hashlib.blake2b(MEM_VERSION + b"|chain|" + gpu_key + start, digest_size=16).digest()
    return int.from_bytes(seeds[:8], "little"), int.from_bytes(seeds[8:], "little")


def start_vector(start_seed: int, n: int) -> np.ndarray:
    """x_0: n values on the 24-bit grid in [-1, 1), float64 (exact in float32)."""
    k = index_values(start_seed, 0, n) >> np.uint64(64 - MEM_BITS)
    return k.astype(np.float64) * 2.0 ** -(MEM_BITS - 1) - 1.0


def pass_offsets(seed: int, r: int, n: int) -> np.ndarray:
    """c_r: n keyed values on the 24-bit grid in [-1, 1), float64 (exact in float32); O(n)."""
    k = index_values(seed, r * n, n) >> np.uint64(64 - MEM_BITS)
    return k.astype(np.float64) * 2.0 ** -(MEM_BITS - 1) - 1.0


def nonlinear(y: np.ndarray, n: int, offsets: np.ndarray) -> np.ndarray:
    """x_r = tanh(3 y_r / sqrt(n) + c_r), float64 when ``offsets`` is (the validator's dtype)."""
    return np.tanh(y * (NONLINEAR_GAIN / math.sqrt(n)) + offsets)


def encode_vector(values: np.ndarray) -> dict:
    data = np.ascontiguousarray(values, dtype="<f4")
    return {
        "dtype": "<f4",
        "shape": [int(data.shape[0])],
        "data": base64.b64encode(data.tobytes()).decode("ascii"),
    }


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


def _block_rows(n: int, budget_bytes: int = 64 << 20) -> int:
    return max(1, min(n, budget_bytes // (16 * n)))


class MemoryEngine:
    """Builds A per GPU once, runs the dependent passes, streams leaves, opens passes.

    ``build`` and ``multiply`` are the two steps a cheating prover would change (the soundness tests
    subclass them); everything else is bookkeeping.
    """

    def __init__(self, device: str = "cpu", threads: int | None = None) -> None:
        self.device = device
        self.threads = threads or os.cpu_count() or 1
        self._spec: MemorySpec | None = None
        self._vectors: list[list[np.ndarray]] = []
        self._matrices: list = []
        self._built: MemorySpec | None = None

    # -- the two honest steps -------------------------------------------------------------------
    def build(self, spec: MemorySpec, gpu: int):
        """A (n x n float32) for one GPU: a numpy array on CPU, a torch tensor on ``cuda:gpu``."""
        row_seed, col_seed = memory_seeds(bytes.fromhex(spec.key), gpu)
        rows, cols = index_values(row_seed, 0, spec.n), index_values(col_seed, 0, spec.n)
        step = _block_rows(spec.n)
        if self.device == "cuda":
            import torch

            device = torch.device("cuda", gpu)
            a_t = torch.empty((spec.n, spec.n), dtype=torch.float32, device=device)
            cols_t = torch.from_numpy(cols.view(np.int64)).to(device)
            for r0 in range(0, spec.n, step):
                rows_t = torch.from_numpy(rows[r0 : r0 + step].view(np.int64)).to(device)
                a_t[r0 : r0 + step] = expensive_block_torch(rows_t, cols_t, spec.hash_rounds)
            torch.cuda.synchronize(device)
            return a_t
        a = np.empty((spec.n, spec.n), dtype=np.float32)

        def fill(r0: int) -> None:
            a[r0 : r0 + step] = expensive_block_np(rows[r0 : r0 + step], cols, spec.hash_rounds)

        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            list(pool.map(fill, range(0, spec.n, step)))
        return a

    def multiply(self, spec: MemorySpec, gpu: int, a, x: np.ndarray) -> np.ndarray:
        """y = A @ x in fp32; returns float32 numpy."""
        if self.device == "cuda":
            import torch

            xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(a.device)
            return torch.mv(a, xt).cpu().numpy()
        return a @ np.ascontiguousarray(x, dtype=np.float32)

    # -- bookkeeping ----------------------------------------------------------------------------
    def _run_gpu(self, spec: MemorySpec, gpu: int, emit) -> tuple[list[np.ndarray], dict]:
        a = self._matrices[gpu]
        x0_seed, offset_seed = chain_seeds(bytes.fromhex(spec.key), bytes.fromhex(spec.start), gpu)
        x = start_vector(x0_seed, spec.n).astype(np.float32)
        offsets = [pass_offsets(offset_seed, r, spec.n).astype(np.float32) for r in range(1, spec.passes)]
        vectors, pass_s = [], []
        for r in range(1, spec.passes + 1):
            t0 = time.perf_counter()
            y = np.asarray(self.multiply(spec, gpu, a, x), dtype=np.float32)
            vectors.append(y)
            leaf = leaf_hash(spec.id_bytes, gpu, r, y)
            pass_s.append(time.perf_counter() - t0)
            emit({"ok": True, "op": "memory_pass", "gpu": gpu, "pass": r, "leaf": leaf.hex()})
            if r < spec.passes:
                x = nonlinear(y, spec.n, offsets[r - 1]).astype(np.float32)
        self._matrices[gpu] = None
        return vectors, {"pass_s": pass_s}

    def _each_gpu(self, spec: MemorySpec, work) -> list:
        if self.device == "cuda":
            with ThreadPoolExecutor(max_workers=spec.gpu_count) as pool:
                return list(pool.map(work, range(spec.gpu_count)))
        return [work(g) for g in range(spec.gpu_count)]

    def prepare(self, challenge: object) -> dict:
        """Build A on every GPU (concurrently on CUDA) and keep it resident for ``commit``."""
        spec = parse_memory_challenge(challenge)
        self._spec, self._vectors, self._matrices, self._built = None, [], [None] * spec.gpu_count, spec

        def build(gpu: int) -> float:
            started = time.perf_counter()
            self._matrices[gpu] = self.build(spec, gpu)
            return time.perf_counter() - started

        build_s = self._each_gpu(spec, build)
        return {"challenge_id": spec.challenge_id, "build_s": build_s}

    def commit(self, request: object, emit=None) -> dict:
        """Run the chain from ``request["start"]`` on the resident A; ``emit(line)`` gets each pass
        line as it happens."""
        built = getattr(self, "_built", None)
        if built is None:
            raise EngineError("nothing built: send memory_build before memory_commit")
        if not isinstance(request, dict) or request.get("challenge_id") != built.challenge_id:
            raise EngineError("memory commit request does not match the built challenge")
        spec = dataclasses.replace(built, start=_hex_field(request, "start", 32))
        emit = emit or (lambda line: None)
        self._built = None
        results = self._each_gpu(spec, lambda g: self._run_gpu(spec, g, emit))
        self._spec, self._vectors = spec, [vectors for vectors, _ in results]
        leaves = [
            [leaf_hash(spec.id_bytes, g, r + 1, y).hex() for r, y in enumerate(vs)]
            for g, vs in enumerate(self._vectors)
        ]
        return {"challenge_id": spec.challenge_id, "leaves": leaves, "timings": [t for _, t in results]}

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


def commit_on_device(engine: ProverEngine, challenge: object, device_index: int) -> dict:
    """A one-GPU GEMM challenge run on ``device_index`` alone (scaling baseline); openable by ``open``."""
    spec = parse_challenge(challenge)
    if spec.gpu_count != 1:
        raise EngineError("a single-device challenge must have gpu_count 1")
    started = time.perf_counter()
    if engine.device == "cuda":
        if not 0 <= device_index < engine._torch.cuda.device_count():
            raise EngineError(f"device {device_index} does not exist")
        out = product_cuda(spec, 0, device_index)
    else:
        out = product_cpu(spec, 0, engine.threads, engine._torch is not None, engine._scratch)
    compute_s = time.perf_counter() - started
    tree = MerkleTree(hash_rows(spec.id_bytes, 0, out, engine.threads))
    engine._committed = _Committed(spec, [out], [tree])
    timings = {"total_s": time.perf_counter() - started, "per_gpu": [{"compute_s": compute_s, "hash_s": 0.0}]}
    return {"challenge_id": spec.challenge_id, "roots": [tree.root.hex()], "timings": timings}


class SustainedRunner:
    """Runs derived segment challenges back to back, emitting one commitment line per segment."""

    def __init__(self, engine: ProverEngine, max_bytes: int = 4 << 30) -> None:
        self.engine = engine
        self.max_bytes = max_bytes
        self._segments: list = []

    def run(self, segments: object, emit=None) -> dict:
        emit = emit or (lambda line: None)
        if not isinstance(segments, list) or not 1 <= len(segments) <= MAX_SEGMENTS:
            raise EngineError(f"segments must be a list of 1..{MAX_SEGMENTS} challenges")
        specs = [parse_challenge(seg) for seg in segments]
        total = sum(4 * s.m * s.p * s.gpu_count for s in specs)
        if total > self.max_bytes:
            raise EngineError(f"segments would keep {total} bytes of outputs, limit {self.max_bytes}")
        self._segments = []
        for index, seg in enumerate(segments):
            commitment = self.engine.commit(seg, keep_previous=True)  # every segment stays openable
            self._segments.append(self.engine._committed)
            emit({"ok": True, "op": "segment", "index": index, "commitment": commitment})
        return {"segments": len(self._segments)}

    def open(self, index: object, request: object) -> dict:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self._segments):
            raise EngineError(f"segment index must be an integer in [0, {len(self._segments)})")
        self.engine._committed = self._segments[index]
        return self.engine.open(request)


DEPTH_OPS = (
    "memory_build",
    "memory_commit",
    "memory_open",
    "sustained",
    "sustained_open",
    "commit_on",
    "probe",
)


def handle_depth_op(box: dict, engine: ProverEngine, message: dict, emit) -> dict:
    """Worker ops of the in-depth proofs; ``box`` keeps per-session state, ``emit`` writes a line now.

    - ``{"op":"memory_build","challenge":{...}}`` -> builds A on every GPU, then
      ``{"ok":true,"op":"memory_build","ready":{challenge_id, build_s}}``
    - ``{"op":"memory_commit","request":{challenge_id, start}}`` -> streams ``memory_pass`` lines, then
      ``{"ok":true,"op":"memory_commit","commitment":{challenge_id, leaves, timings}}``
    - ``{"op":"memory_open","request":{challenge_id, passes}}`` -> ``{"op":"memory_open","opening":{...}}``
    - ``{"op":"sustained","segments":[challenge, ...]}`` -> one ``segment`` line per segment (with its
      commitment), then ``{"op":"sustained","segments":count}``
    - ``{"op":"sustained_open","index":k,"request":{...}}`` -> ``{"op":"sustained_open","opening":{...}}``
    - ``{"op":"commit_on","device":i,"challenge":{gpu_count 1}}`` -> ``{"op":"commit_on","commitment":{...}}``
      (then the ordinary ``open`` opens it)
    - ``{"op":"probe","request":{"what":"cpu"|"ram"|"disk",...}}`` -> ``{"op":"probe","result":{...}}``
    """
    op = message["op"]
    if op == "memory_build":
        box["memory"] = MemoryEngine(engine.device, engine.threads)
        return {"ok": True, "op": op, "ready": box["memory"].prepare(message.get("challenge"))}
    if op == "memory_commit":
        if "memory" not in box:
            raise EngineError("nothing built: send memory_build before memory_commit")
        return {"ok": True, "op": op, "commitment": box["memory"].commit(message.get("request"), emit)}
    if op == "memory_open":
        if "memory" not in box:
            raise EngineError("nothing committed: send memory_commit before memory_open")
        return {"ok": True, "op": op, "opening": box["memory"].open(message.get("request"))}
    if op == "sustained":
        box["sustained"] = SustainedRunner(engine)
        return {"ok": True, "op": op, **box["sustained"].run(message.get("segments"), emit)}
    if op == "sustained_open":
        if "sustained" not in box:
            raise EngineError("no sustained run: send sustained before sustained_open")
        return {
            "ok": True,
            "op": op,
            "opening": box["sustained"].open(message.get("index"), message.get("request")),
        }
    if op == "commit_on":
        device = message.get("device")
        if isinstance(device, bool) or not isinstance(device, int):
            raise EngineError("device must be an integer")
        return {
            "ok": True,
            "op": op,
            "commitment": commit_on_device(engine, message.get("challenge"), device),
        }
    if op == "probe":
        return {"ok": True, "op": op, "result": run_probe(message.get("request"))}
    raise EngineError(f"unknown depth op {op!r}")
