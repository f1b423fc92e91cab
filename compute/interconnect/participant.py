"""A participant of an interconnect proof: JSON lines on stdin/stdout, a torch.distributed all-reduce.

``serve()`` reads ``Setup`` (join the process group: gloo on CPU, NCCL on CUDA, the same code),
answers ``Ready`` after a warm-up collective, then per ``Reveal``: generate its own keyed shard
(``shards.shard_rows``), all-reduce it in segments (the next segment is generated while the last
one travels, the one before is hashed), commit the Merkle root of the reduced vector
(``Commit``), keep vector and tree in memory, and answer ``OpenRequest`` with chunks and paths.
``Plain`` runs a plain all-reduce of as many words, for the benchmark's comparison.

torch is imported here only (the validator's side never imports this module). It does not time
anything the validator credits: the ``phases`` it reports are advisory. Logs go to stderr.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from compute.pog.merkle import MerkleTree, hash_rows

from .shards import as_leaf_rows, shard_rows
from .wire import (
    ChunkProof,
    Commit,
    Int32Chunk,
    Opening,
    OpenRequest,
    PhaseTimes,
    Plain,
    PlainDone,
    Ready,
    Reveal,
    Setup,
    encode,
    parse_to_participant,
)

log = logging.getLogger(__name__)


@dataclass
class _Held:
    """The committed result, kept until the next reveal."""

    challenge_id: str
    vector: np.ndarray  # int32 [chunks, chunk_len], host memory
    tree: MerkleTree


class Participant:
    def __init__(self, setup: Setup) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.setup = torch, dist, setup
        cuda = setup.device == "cuda" or (setup.device == "auto" and torch.cuda.is_available())
        if cuda:
            torch.cuda.set_device(setup.rank % torch.cuda.device_count())
        self.device = torch.device("cuda" if cuda else "cpu")
        dist.init_process_group(
            "nccl" if cuda else "gloo", init_method=setup.init_method, rank=setup.rank, world_size=setup.world
        )
        warm = torch.ones(1024, dtype=torch.int32, device=self.device)
        dist.all_reduce(warm)  # connections up, off the clock
        self.held: _Held | None = None

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def reduce_and_commit(self, reveal: Reveal) -> Commit:
        torch, dist = self.torch, self.dist
        started = time.perf_counter()
        key, cid = bytes.fromhex(reveal.key), bytes.fromhex(reveal.challenge_id)
        host = np.empty((reveal.chunks, reveal.chunk_len), dtype=np.int32)
        on_host = self.device.type == "cpu"
        tensor = (
            torch.from_numpy(host)
            if on_host
            else torch.empty(host.shape, dtype=torch.int32, device=self.device)
        )
        leaves: list[bytes] = []
        times = {"generate": 0.0, "reduce": 0.0, "hash": 0.0}

        def finish(work, r0: int, r1: int) -> None:  # noqa: ANN001 - a torch.distributed Work
            t = time.perf_counter()
            work.wait()
            if not on_host:
                host[r0:r1] = tensor[r0:r1].cpu().numpy()
            t2 = time.perf_counter()
            leaves.extend(
                hash_rows(cid, reveal.rank, as_leaf_rows(host[r0:r1]), self.setup.threads, start=r0)
            )
            times["reduce"] += t2 - t
            times["hash"] += time.perf_counter() - t2

        pending = None
        step = self.setup.segment_chunks
        for r0 in range(0, reveal.chunks, step):
            r1 = min(r0 + step, reveal.chunks)
            t = time.perf_counter()
            shard_rows(key, r0, r1 - r0, reveal.chunk_len, out=host[r0:r1])
            if not on_host:
                tensor[r0:r1].copy_(torch.from_numpy(host[r0:r1]))
            times["generate"] += time.perf_counter() - t
            work = dist.all_reduce(tensor[r0:r1], async_op=True)
            if pending is not None:
                finish(*pending)
            pending = (work, r0, r1)
        if pending is not None:
            finish(*pending)
        tree = MerkleTree(leaves)
        self.held = _Held(reveal.challenge_id, host, tree)
        phases = PhaseTimes(
            generate_s=times["generate"],
            reduce_s=times["reduce"],
            hash_s=times["hash"],
            total_s=time.perf_counter() - started,
        )
        return Commit(challenge_id=reveal.challenge_id, rank=reveal.rank, root=tree.root.hex(), phases=phases)

    def open(self, request: OpenRequest) -> Opening:
        held = self.held
        if held is None or held.challenge_id != request.challenge_id:
            return Opening(challenge_id=request.challenge_id, rank=self.setup.rank, chunks=[])
        proofs = [
            ChunkProof(
                index=i,
                chunk=Int32Chunk.from_numpy(held.vector[i]),
                path=[node.hex() for node in held.tree.path(i)],
            )
            for i in request.chunks
            if i < len(held.vector)
        ]
        return Opening(challenge_id=request.challenge_id, rank=self.setup.rank, chunks=proofs)

    def plain(self, request: Plain) -> PlainDone:
        tensor = self.torch.full(
            (request.words,), self.setup.rank + 1, dtype=self.torch.int32, device=self.device
        )
        self._sync()
        t = time.perf_counter()
        self.dist.all_reduce(tensor)
        self._sync()
        return PlainDone(rank=self.setup.rank, reduce_s=time.perf_counter() - t)

    def close(self) -> None:
        self.dist.destroy_process_group()


def serve(stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Answer one validator over JSON lines until stdin closes."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    first = stdin.readline()
    if not first:
        return 0
    setup = parse_to_participant(first)
    if not isinstance(setup, Setup):
        raise SystemExit(f"expected interconnect.setup first, got {setup.kind}")
    participant = Participant(setup)
    stdout.write(encode(Ready(rank=setup.rank, device=participant.device.type)))
    stdout.flush()
    try:
        for line in stdin:
            message = parse_to_participant(line)
            if isinstance(message, Reveal):
                reply = encode(participant.reduce_and_commit(message))
            elif isinstance(message, OpenRequest):
                reply = encode(participant.open(message))
            elif isinstance(message, Plain):
                reply = encode(participant.plain(message))
            else:
                raise SystemExit("interconnect.setup sent twice")
            stdout.write(reply)
            stdout.flush()
    finally:
        participant.close()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    raise SystemExit(serve())
