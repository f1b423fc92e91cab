"""The fleet benchmark prover's in-depth answers: memory (GPU and host RAM), CPU and disk probes.

Same idea as ``prover.py``: every opening is derived in advance from the benchmark seed, so only the
opened parts are computed -- the secret rows of A for the opened passes of the memory chain (the
rest of an opened pass vector is zeros, a pass never opened commits a filler leaf; all of them feed
the lockstep word exactly as the validator recomputes it), the checked CPU chain segments (from filler checkpoints before them), and
the read-back disk blocks (each chained from its filler predecessor) under a sparse Merkle root.
Lines are held until a device of the ``Device`` figures would have delivered them, so the
validator's time judges see production pacing. Benchmark-only (see ``prover.py``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import numpy as np

from compute.lab.bench.fleet.device import Answer, Device
from compute.lab.bench.fleet.sparse_tree import SparseMerkleTree
from compute.lab.bench.fleet.wire import array_json
from compute.pog import MemoryChallenge, choose_memory_openings, disk_read_request
from compute.pog.draws import CPU_CHECKS, DISK_BLOCKS, MEMORY_PASSES, MEMORY_ROWS, derived_rng
from compute.pog.host.probe import (
    CPU_BLOCK,
    CPU_CHECKPOINTS,
    DISK_BLOCK,
    PROBE_VERSION,
    block_leaf,
    block_opening,
    chain_origin,
    chain_steps,
    cpu_block,
    disk_block,
    disk_parent,
)
from compute.pog.memory.kernel import lockstep_word, next_x, pass_leaf, pass_offsets, round_keys, start_vector
from compute.pog.memory.rows_kernel import element_rows

MEMORY_OPEN_PASSES = 3  # the validator's memory_open_passes (GPU) and RAM opening
MEMORY_ROWS_CHECKED = 8  # verify_memory's rows_per_gpu
CPU_CHECKED = 8  # host.check.CPU_SEGMENT_CHECKS
DISK_READS = 8  # disk_read_request's default
FILLER = bytes(32)


class _MemoryRun:
    """One memory (or RAM) proof: built (what does not depend on the start nonce), then the chain."""

    def __init__(self, seed: bytes, challenge: dict, open_passes: int) -> None:
        """The build: the checked rows of A and the leaves of the passes never opened, before the start."""
        self.challenge = challenge
        spec = MemoryChallenge.model_validate({**challenge, "start": "0" * 32})
        self.key, self.cid, self.n = bytes.fromhex(spec.key), bytes.fromhex(spec.challenge_id), spec.n
        self.gpus, self.passes = range(spec.gpu_count), spec.passes
        self.wanted = choose_memory_openings(
            spec, open_passes, rng=derived_rng(seed, MEMORY_PASSES, spec.challenge_id)
        ).passes
        rng = derived_rng(seed, MEMORY_ROWS, spec.challenge_id)
        count = min(MEMORY_ROWS_CHECKED, spec.n)
        self.rows = [sorted(int(i) for i in rng.choice(spec.n, count, replace=False)) for _ in self.gpus]
        keys = [round_keys(self.key, g, spec.hash_rounds) for g in self.gpus]
        self.a_rows = [element_rows(np.asarray(self.rows[g]), spec.n, keys[g]) for g in self.gpus]
        # a pass never opened is never checked against its leaf: any 32 bytes will do (it still feeds
        # the lockstep word, which the validator takes from the committed leaves as they are)
        filler = derived_rng(seed, "memory-filler", spec.challenge_id)
        self.filler_leaves = [[filler.bytes(32) for _ in range(spec.passes)] for _ in self.gpus]
        self.vectors: list[dict[int, np.ndarray]] = [{} for _ in self.gpus]

    def chain(self, start: str) -> Iterator[list[bytes]]:
        """Each pass's leaves (one per GPU), computed just in time: only the checked rows of the
        opened passes hold real words, the other passes sent are zeros, those never sent are filler."""
        nonce, n = bytes.fromhex(start), self.n
        needed = [{r for p in self.wanted[g] for r in (p, p - 1)} - {0} for g in self.gpus]
        xs = [start_vector(self.key, nonce, g, n) if 1 in self.wanted[g] else None for g in self.gpus]
        for r in range(1, self.passes + 1):
            leaves = []
            for g in self.gpus:
                if r in needed[g]:
                    y = np.zeros(n, dtype=np.uint32)
                    x = xs[g]
                    if r in self.wanted[g] and x is not None:
                        y[self.rows[g]] = self.a_rows[g] @ x  # uint32 matmul wraps, like the validator's
                    self.vectors[g][r] = y
                    leaves.append(pass_leaf(self.cid, g, r, y))
                else:
                    leaves.append(self.filler_leaves[g][r - 1])
            word = lockstep_word(leaves)
            for g in self.gpus:
                if r + 1 in self.wanted[g]:  # x_r only matters where pass r + 1 is checked
                    xs[g] = next_x(self.vectors[g][r], pass_offsets(self.key, nonce, g, r, n), word)
            yield leaves

    def open(self, request: Any) -> dict:
        passes = request.get("passes") if isinstance(request, dict) else None
        if not isinstance(passes, list) or len(passes) != len(self.vectors):
            raise ValueError("memory opening request does not match the commitment")
        per_gpu = []
        for g, wanted in enumerate(passes):
            ordered = sorted({r for p in wanted for r in (p, p - 1)} - {0})
            zeros = np.zeros(self.challenge["n"], dtype=np.uint32)
            vectors = [array_json(self.vectors[g].get(r, zeros), "<u4") for r in ordered]
            per_gpu.append({"indices": ordered, "vectors": vectors})
        return {"challenge_id": self.challenge["challenge_id"], "per_gpu": per_gpu}


class DepthAnswers:
    """The in-depth ops of one worker session (``memory_*``, ``ram_*``, ``probe``, ``disk_*``)."""

    def __init__(self, seed: bytes, device: Device) -> None:
        self.seed, self.device = seed, device
        self._memory: dict[str, _MemoryRun] = {}
        self._disk: tuple[SparseMerkleTree, dict[int, bytes], bytes] | None = None

    def handle(self, op: Any, message: dict):
        if isinstance(op, str) and op.startswith(("memory_", "ram_")):
            slot, step = op.split("_", 1)
            return Answer(self._memory_op(slot, step, op, message))
        if op == "probe":
            return Answer(self._cpu(message.get("request")))
        if op == "disk_write":
            return Answer(self._disk_write(message.get("request")))
        if op == "disk_read":
            return Answer(self._disk_read(message.get("request")))
        raise ValueError(f"unknown op {op!r}")

    def _pass_seconds(self, slot: str, challenge: dict) -> float:
        matrix_bytes = 4 * challenge["n"] ** 2
        gbs = self.device.bandwidth_gbs if slot == "memory" else self.device.host_bandwidth_gbs
        return matrix_bytes / (gbs * 1e9)

    def _memory_op(self, slot: str, step: str, op: str, message: dict):
        if step == "build":
            challenge = message.get("challenge")
            if not isinstance(challenge, dict):
                raise ValueError("memory challenge must be an object")
            self._memory[slot] = _MemoryRun(self.seed, challenge, MEMORY_OPEN_PASSES)
            ready = {"challenge_id": challenge["challenge_id"], "build_s": [0.2] * challenge["gpu_count"]}
            return [(0.2, {"ok": True, "op": op, "ready": ready})]
        run = self._memory.get(slot)
        if run is None:
            raise ValueError(f"nothing built: send {slot}_build before {op}")
        if step == "open":
            return [(0.0, {"ok": True, "op": op, "opening": run.open(message.get("request"))})]
        request = message.get("request")
        if not isinstance(request, dict) or not isinstance(request.get("start"), str):
            raise ValueError("memory commit request needs the start nonce")
        return self._passes(run, op, request["start"], self._pass_seconds(slot, run.challenge))

    @staticmethod
    def _passes(run: _MemoryRun, op: str, start: str, pass_s: float) -> Iterator[tuple[float, dict]]:
        """Pass lines, each computed just before it is due, then the commitment."""
        leaves: list[list[str]] = [[] for _ in run.gpus]
        for r, pass_leaves in enumerate(run.chain(start), start=1):
            for g, leaf in enumerate(pass_leaves):
                leaves[g].append(leaf.hex())
                yield r * pass_s, {"ok": True, "op": "memory_pass", "gpu": g, "pass": r, "leaf": leaf.hex()}
        commitment = {"challenge_id": run.challenge["challenge_id"], "leaves": leaves}
        yield run.passes * pass_s, {"ok": True, "op": op, "commitment": commitment}

    def _cpu(self, request: Any) -> list[tuple[float, dict]]:
        if not isinstance(request, dict) or request.get("what") != "cpu":
            raise ValueError("probe request must be a cpu request")
        seed, chains, steps = bytes.fromhex(request["seed"]), int(request["chains"]), int(request["steps"])
        rng = derived_rng(self.seed, CPU_CHECKS, request["seed"])
        checked = [
            (int(rng.integers(chains)), int(rng.integers(CPU_CHECKPOINTS))) for _ in range(CPU_CHECKED)
        ]
        checkpoints = [[FILLER.hex()] * CPU_CHECKPOINTS for _ in range(chains)]
        block, per = cpu_block(seed), steps // CPU_CHECKPOINTS
        for k, i in sorted(set(checked), key=lambda ki: ki[1]):  # a checked predecessor first
            previous = chain_origin(seed, k) if i == 0 else bytes.fromhex(checkpoints[k][i - 1])
            checkpoints[k][i] = chain_steps(previous, block, per).hex()
        work = chains * steps * (CPU_BLOCK + 32)
        seconds = work / (chains * self.device.core_gbs * 1e9)
        result = {"what": "cpu", "version": PROBE_VERSION, "checkpoints": checkpoints}
        return [(seconds, {"ok": True, "op": "probe", "result": result})]

    def _disk_write(self, request: Any) -> list[tuple[float, dict]]:
        if not isinstance(request, dict):
            raise ValueError("disk request must be an object")
        seed_hex, count = request["seed"], int(request["bytes"]) // DISK_BLOCK
        seed = bytes.fromhex(seed_hex)
        picks = disk_read_request(
            count, DISK_READS, rng=derived_rng(self.seed, DISK_BLOCKS, seed_hex), seed=seed_hex
        )["blocks"]
        blocks: dict[int, bytes] = {}
        for k in block_opening(seed, picks):  # ascending: a block's previous and parent come first
            if k in picks:  # chained from the (filler or real) blocks the validator reads back with it
                parent = disk_parent(seed, k)
                previous = blocks[k - 1] if k else b""
                blocks[k] = disk_block(seed, k, previous, b"" if parent is None else blocks[parent])
            else:
                blocks[k] = bytes(DISK_BLOCK)
        tree = SparseMerkleTree(count, FILLER, {k: block_leaf(data) for k, data in blocks.items()})
        self._disk = (tree, blocks, seed)
        result = {
            "what": "disk",
            "version": PROBE_VERSION,
            "bytes": count * DISK_BLOCK,
            "root": tree.root.hex(),
        }
        return [
            (
                count * DISK_BLOCK / (self.device.disk_gbs * 1e9),
                {"ok": True, "op": "disk_write", "result": result},
            )
        ]

    def _disk_read(self, request: Any) -> list[tuple[float, dict]]:
        if self._disk is None:
            raise ValueError("nothing written: send disk_write before disk_read")
        tree, blocks, seed = self._disk
        indices = request.get("blocks") if isinstance(request, dict) else None
        if not isinstance(indices, list):
            raise ValueError("blocks must be a list")
        opened = [
            {
                "index": k,
                "data": base64.b64encode(blocks.get(k, bytes(DISK_BLOCK))).decode("ascii"),
                "path": [node.hex() for node in tree.path(k)],
            }
            for k in block_opening(seed, indices)
        ]
        self._disk = None
        result = {"what": "disk", "version": PROBE_VERSION, "blocks": opened}
        return [(0.01, {"ok": True, "op": "disk_read", "result": result})]


__all__ = ["DepthAnswers"]
