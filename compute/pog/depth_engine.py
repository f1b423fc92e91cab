"""Prover side of the in-depth proofs: op dispatch, sustained segments, single-device commits.

Plain dicts validated with plain code (no pydantic), stdlib + numpy (+ torch when present), so this
module is embedded verbatim in the worker script next to ``engine.py``, ``memory/prover.py`` (memory
proof v2 on the GPUs, and on the host for RAM) and ``host/probe.py`` (CPU cores, disk). It does not
choose challenges, time anything that matters, or verify.
"""

from __future__ import annotations

import time

from .engine import EngineError, ProverEngine, _Committed, parse_challenge, product_cpu, product_cuda
from .host.probe import DiskProbe, probe_cpu
from .memory.prover import MemoryEngine
from .merkle import MerkleTree, hash_rows

MAX_SEGMENTS = 1024


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
    "ram_build",
    "ram_commit",
    "ram_open",
    "disk_write",
    "disk_read",
    "sustained",
    "sustained_open",
    "commit_on",
    "probe",
)


def _memory_op(box: dict, engine: ProverEngine, op: str, message: dict, emit) -> dict:
    """``memory_*`` on the GPUs (or the CPU device), ``ram_*``: the same proof in host memory."""
    slot, step = op.split("_", 1)
    if step == "build":
        box[slot] = MemoryEngine(engine.device if slot == "memory" else "cpu", engine.threads)
        return {"ok": True, "op": op, "ready": box[slot].prepare(message.get("challenge"))}
    if slot not in box:
        raise EngineError(f"nothing built: send {slot}_build before {op}")
    if step == "commit":
        return {"ok": True, "op": op, "commitment": box[slot].commit(message.get("request"), emit)}
    return {"ok": True, "op": op, "opening": box[slot].open(message.get("request"))}


def handle_depth_op(box: dict, engine: ProverEngine, message: dict, emit) -> dict:
    """Worker ops of the in-depth proofs; ``box`` keeps per-session state, ``emit`` writes a line now.

    - ``{"op":"memory_build","challenge":{...}}`` -> builds A on every GPU, then
      ``{"ok":true,"op":"memory_build","ready":{challenge_id, build_s}}``
    - ``{"op":"memory_commit","request":{challenge_id, start}}`` -> streams ``memory_pass`` lines, then
      ``{"ok":true,"op":"memory_commit","commitment":{challenge_id, leaves}}``
    - ``{"op":"memory_open","request":{challenge_id, passes}}`` -> ``{"op":"memory_open","opening":{...}}``
    - ``ram_build`` / ``ram_commit`` / ``ram_open``: the same, resident in host memory
    - ``{"op":"disk_write","request":{seed, bytes, path}}`` -> ``{"op":"disk_write","result":{bytes, root}}``
    - ``{"op":"disk_read","request":{blocks}}`` -> ``{"op":"disk_read","result":{blocks}}`` (file deleted)
    - ``{"op":"probe","request":{"what":"cpu",seed,chains,steps}}`` -> ``{"op":"probe","result":{...}}``
    - ``{"op":"sustained","segments":[challenge, ...]}`` -> one ``segment`` line per segment (with its
      commitment), then ``{"op":"sustained","segments":count}``
    - ``{"op":"sustained_open","index":k,"request":{...}}`` -> ``{"op":"sustained_open","opening":{...}}``
    - ``{"op":"commit_on","device":i,"challenge":{gpu_count 1}}`` -> ``{"op":"commit_on","commitment":{...}}``
      (then the ordinary ``open`` opens it)
    """
    op = message["op"]
    if op.startswith(("memory_", "ram_")):
        return _memory_op(box, engine, op, message, emit)
    if op == "disk_write":
        box["disk"] = box.get("disk") or DiskProbe()
        return {"ok": True, "op": op, "result": box["disk"].write(message.get("request"))}
    if op == "disk_read":
        if "disk" not in box:
            raise EngineError("nothing written: send disk_write before disk_read")
        return {"ok": True, "op": op, "result": box["disk"].read(message.get("request"))}
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
        request = message.get("request")
        if not isinstance(request, dict) or request.get("what") != "cpu":
            raise EngineError('probe request must be {"what": "cpu", ...} (RAM: ram_*, disk: disk_*)')
        return {"ok": True, "op": op, "result": probe_cpu(request)}
    raise EngineError(f"unknown depth op {op!r}")
