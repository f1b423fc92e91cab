"""The fleet benchmark's prover: honest answers at production shapes, at a fraction of the work.

It speaks the worker protocol (``compute.pog.worker_main``: ping, info, warmup, commit, open, commit_on,
sustained, sustained_open, and the in-depth ops of ``prover_depth``) to the REAL validator, which
verifies everything as in production: Merkle paths, exact recomputation of the sampled entries at
production n, memory passes, host probes. What makes it cheap is that it is told the openings in
advance: the benchmark's validator process runs inside ``compute.pog.draws.predictable_draws(seed)``
and this prover, given the same seed on its command line, derives every opening the validator will
draw (``draws.derived_rng``) before it commits. It then computes only the entries, rows and blocks
that will be opened (with the validator's own exact recomputation) and commits filler to the rest
(``SparseMerkleTree``). Each answer is held until a simulated device would have finished
(``Device``), so the validator's clock sees production timings.

Why a real validator can never meet it: its answers verify only where the validator's draws are
predictable, which needs ``predictable_draws`` installed inside the validator's own process -- no
message, setting or flag of the worker protocol or the validator carries the seed (tests play a
real-draws validator against it and watch it fail). It lives in the benchmark's package; no miner
or validator entry point imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from compute.lab.bench.fleet.device import Answer, Device
from compute.lab.bench.fleet.prover_depth import DepthAnswers
from compute.lab.bench.fleet.sparse_tree import SparseMerkleTree
from compute.lab.bench.fleet.wire import array_json
from compute.pog import Challenge, choose_openings
from compute.pog.draws import GEMM_OPENINGS, derived_rng
from compute.pog.merkle import leaf_hash
from compute.pog.recompute import expected_entries

FILLER = bytes(32)  # the leaf committed for every row that will not be opened

# The validator's opening shapes (compute.validator: params.rows_per_gpu/cols_per_row for the GEMM
# proof, 4 x 4 for scaling and sustained segments, 3 segments opened). A change there shows here
# as a rejected proof in the benchmark's failures, never as a silent pass.
GEMM_SHAPE = (8, 4)
DEPTH_SHAPE = (4, 4)
SEGMENTS_OPENED = 3


@dataclass
class _Committed:
    challenge: Challenge
    rows: list[dict[int, np.ndarray]]  # per GPU: opened row index -> the row committed
    trees: list[SparseMerkleTree]


def commit_opened(seed: bytes, challenge: Challenge, shape: tuple[int, int]) -> _Committed:
    """Commit to a product whose will-be-opened rows hold the exact entries (the rest: filler)."""
    request = choose_openings(challenge, *shape, rng=derived_rng(seed, GEMM_OPENINGS, challenge.challenge_id))
    cid = bytes.fromhex(challenge.challenge_id)
    rows, trees = [], []
    for g in range(challenge.gpu_count):
        exact = expected_entries(challenge, g, request.rows[g], request.cols[g])
        opened, at = {}, 0
        for i, cols in zip(request.rows[g], request.cols[g], strict=True):
            row = np.zeros(challenge.p, dtype=np.float32)
            row[cols] = exact[at : at + len(cols)]  # rounded to fp32 like an honest product
            at += len(cols)
            opened[i] = row
        leaves = {i: leaf_hash(cid, g, i, row) for i, row in opened.items()}
        rows.append(opened)
        trees.append(SparseMerkleTree(challenge.m, FILLER, leaves))
    return _Committed(challenge, rows, trees)


def _roots(committed: _Committed) -> dict:
    roots = [tree.root.hex() for tree in committed.trees]
    return {"challenge_id": committed.challenge.challenge_id, "roots": roots}


def open_rows(committed: _Committed, request: Any) -> dict:
    """The requested rows with their paths (filler rows where the validator asked other rows)."""
    rows = request.get("rows") if isinstance(request, dict) else None
    if not isinstance(rows, list) or len(rows) != committed.challenge.gpu_count:
        raise ValueError("open request does not match the commitment")
    per_gpu = []
    for g, indices in enumerate(rows):
        zeros = np.zeros(committed.challenge.p, dtype=np.float32)
        per_gpu.append(
            {
                "rows": [
                    {
                        "index": i,
                        "row": array_json(committed.rows[g].get(i, zeros), "<f4"),
                        "path": [node.hex() for node in committed.trees[g].path(i)],
                    }
                    for i in indices
                ]
            }
        )
    return {"challenge_id": committed.challenge.challenge_id, "per_gpu": per_gpu}


class FleetProver:
    """One worker session's state; ``handle(message)`` -> the timed lines that answer it."""

    def __init__(self, seed: bytes, gpus: int, uuid_prefix: str, device: Device | None = None) -> None:
        self.seed, self.gpus, self.uuid_prefix = seed, gpus, uuid_prefix
        self.device = device or Device()
        self.depth = DepthAnswers(seed, self.device)
        self._committed: _Committed | None = None
        self._segments: dict[int, _Committed] = {}

    def handle(self, message: dict) -> Answer:
        op = message.get("op")
        if op == "ping":
            return Answer([(0.0, {"ok": True, "op": "ping"})])
        if op == "info":
            return Answer([(0.0, {"ok": True, "op": "info", **self._info()})])
        if op == "warmup":
            return Answer([(0.05, {"ok": True, "op": "warmup"})])
        if op in ("commit", "commit_on"):
            return self._commit(op, message)
        if op == "open":
            if self._committed is None:
                raise ValueError("nothing committed: send commit before open")
            return Answer(
                [
                    (
                        0.0,
                        {
                            "ok": True,
                            "op": "open",
                            "opening": open_rows(self._committed, message.get("request")),
                        },
                    )
                ]
            )
        if op == "sustained":
            return self._sustained(message.get("segments"))
        if op == "sustained_open":
            committed = self._segments.get(message.get("index"))  # type: ignore[arg-type]
            if committed is None:
                raise ValueError("segment not opened by this prover")
            opening = open_rows(committed, message.get("request"))
            return Answer([(0.0, {"ok": True, "op": "sustained_open", "opening": opening})])
        return self.depth.handle(op, message)

    def _info(self) -> dict:
        devices = [
            {
                "index": g,
                "name": self.device.name,
                "memory_bytes": self.device.memory_bytes,
                "uuid": f"GPU-{self.uuid_prefix}-{g:02d}",
            }
            for g in range(self.gpus)
        ]
        return {"devices": devices, "torch": "fleet-bench", "cuda": True}

    def _commit(self, op: str, message: dict) -> Answer:
        challenge = Challenge.model_validate(message.get("challenge"))
        shape = GEMM_SHAPE if op == "commit" else DEPTH_SHAPE
        self._committed = commit_opened(self.seed, challenge, shape)
        reply = {"ok": True, "op": op, "commitment": _roots(self._committed)}
        return Answer([(self.device.gemm_seconds(challenge), reply)])

    def _sustained(self, segments: Any) -> Answer:
        if not isinstance(segments, list) or not segments:
            raise ValueError("segments must be a non-empty list")
        challenges = [Challenge.model_validate(s) for s in segments]
        from compute.pog.draws import SUSTAINED_SEGMENTS

        rng = derived_rng(self.seed, SUSTAINED_SEGMENTS, challenges[0].challenge_id)
        count = len(challenges)
        others = rng.choice(count - 1, size=min(SEGMENTS_OPENED - 1, count - 1), replace=False)
        opened = {count - 1, *(int(i) for i in others)}
        self._segments = {k: commit_opened(self.seed, challenges[k], DEPTH_SHAPE) for k in opened}
        lines, at = [], 0.0
        for k, challenge in enumerate(challenges):
            at += self.device.gemm_seconds(challenge)
            if k in self._segments:
                commitment = _roots(self._segments[k])
            else:  # never opened: any roots will do
                filler = [
                    derived_rng(self.seed, "filler", f"{challenge.challenge_id}{g}").bytes(32).hex()
                    for g in range(challenge.gpu_count)
                ]
                commitment = {"challenge_id": challenge.challenge_id, "roots": filler}
            lines.append((at, {"ok": True, "op": "segment", "index": k, "commitment": commitment}))
        lines.append((at, {"ok": True, "op": "sustained", "segments": count}))
        return Answer(lines)
