"""The validator's side of an interconnect proof: challenge, openings and verdict (pure, numpy only).

A challenge names ``world`` participants (each at an endpoint the validator itself reaches: an SSH
host, a lease; no two alike), a secret master key and the vector's shape (``chunks`` x
``chunk_len`` int32 words). The session (``session.py``) reveals each participant's shard key at
``started_at`` on the validator's own clock and stamps each commitment's arrival on the same
clock; here those stamps and the openings become a verdict:

- every participant committed, under its own rank and the challenge's id, after the reveal and
  before ``started_at + deadline_s`` (a late, early, missing or misaddressed commitment fails
  the cluster: the clock stops only at the last one);
- no two participants committed the same root (the leaves bind the rank, so a copied root is a
  participant that did not hold the result itself);
- every opened chunk's Merkle path leads to that participant's root and its words equal the sum
  (mod 2**32) of the regenerated shards' chunks, exactly.

Bandwidth is what a ring all-reduce must carry over each link, ``2 (world - 1) / world`` times
the vector's bytes, divided by the validator-timed interval from the reveal to the last
commitment: generation and hashing sit inside the interval, so the figure can only understate the
link. It is a figure for the slowest link of the ring and says nothing about links to parties
outside the cluster (docs/cluster.md). This module does no I/O and never reads a clock.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from compute.pog.merkle import MerkleTree, hash_rows, leaf_hash, root_from_path

from .shards import as_leaf_rows, participant_key, reduced_rows
from .wire import Commit, Opening, OpenRequest, Reveal


class InterconnectError(ValueError):
    """A challenge that cannot be issued (a roster with duplicated endpoints, a shape out of bounds)."""


@dataclass(frozen=True)
class InterconnectChallenge:
    challenge_id: bytes  # 16 random bytes
    master: bytes = field(
        repr=False
    )  # 16 random bytes, never sent nor logged: each participant gets its own key
    endpoints: tuple[str, ...]  # rank -> the endpoint the validator reaches it at
    chunks: int
    chunk_len: int
    deadline_s: float  # from the reveal; a commitment after it is late
    open_per_participant: int = 4

    @property
    def world(self) -> int:
        return len(self.endpoints)

    @property
    def vector_bytes(self) -> int:
        return self.chunks * self.chunk_len * 4

    @property
    def link_bytes(self) -> float:
        """Bytes each link of a ring all-reduce carries: reduce-scatter plus all-gather."""
        return 2 * (self.world - 1) / self.world * self.vector_bytes

    def reveal(self, rank: int) -> Reveal:
        return Reveal(
            challenge_id=self.challenge_id.hex(),
            key=participant_key(self.master, rank).hex(),
            rank=rank,
            world=self.world,
            chunks=self.chunks,
            chunk_len=self.chunk_len,
        )


def new_challenge(
    endpoints: list[str] | tuple[str, ...],
    vector_bytes: int,
    deadline_s: float,
    chunk_len: int = 4096,
    open_per_participant: int = 4,
) -> InterconnectChallenge:
    """A fresh secret challenge over ``endpoints`` (rank order); refused when two endpoints repeat."""
    endpoints = tuple(endpoints)
    if len(endpoints) < 2:
        raise InterconnectError("an interconnect proof needs at least two participants")
    repeated = sorted({e for e in endpoints if endpoints.count(e) > 1})
    if repeated:
        raise InterconnectError(f"one endpoint named for several participants: {', '.join(repeated)}")
    chunks = max(1, vector_bytes // (4 * chunk_len))
    return InterconnectChallenge(
        challenge_id=secrets.token_bytes(16),
        master=secrets.token_bytes(16),
        endpoints=endpoints,
        chunks=chunks,
        chunk_len=chunk_len,
        deadline_s=deadline_s,
        open_per_participant=min(open_per_participant, chunks),
    )


def choose_openings(challenge: InterconnectChallenge) -> dict[int, OpenRequest]:
    """Distinct random chunks per participant, drawn after the clock stopped."""
    rng = secrets.SystemRandom()
    return {
        rank: OpenRequest(
            challenge_id=challenge.challenge_id.hex(),
            chunks=sorted(rng.sample(range(challenge.chunks), challenge.open_per_participant)),
        )
        for rank in range(challenge.world)
    }


@dataclass(frozen=True)
class Arrival:
    """A commitment as the validator's clock saw it arrive."""

    commit: Commit
    at: float


@dataclass(frozen=True)
class InterconnectVerdict:
    passed: bool
    interval_s: float | None  # reveal -> last commitment, validator's clock; None when one is missing
    link_bytes: float
    bandwidth_gbs: float  # link_bytes / interval in GB/s; 0.0 unless passed
    failures: tuple[str, ...]
    verify_cpu_s: float  # the validator's CPU for the openings (all participants)


def _commit_failures(
    challenge: InterconnectChallenge, started_at: float, arrivals: dict[int, Arrival]
) -> list[str]:
    out = []
    cid = challenge.challenge_id.hex()
    for rank in range(challenge.world):
        arrival = arrivals.get(rank)
        where = f"rank {rank} ({challenge.endpoints[rank]})"
        if arrival is None:
            out.append(f"{where}: no commitment")
        elif arrival.commit.rank != rank or arrival.commit.challenge_id != cid:
            out.append(f"{where}: commitment names rank {arrival.commit.rank} of another challenge or rank")
        elif arrival.at < started_at:
            out.append(f"{where}: committed before the reveal")
        elif arrival.at > started_at + challenge.deadline_s:
            out.append(f"{where}: late by {arrival.at - started_at - challenge.deadline_s:.3f} s")
    roots = [a.commit.root for a in arrivals.values()]
    if len(set(roots)) < len(roots):
        out.append("the same root committed for several participants")
    return out


def _opening_failures(
    challenge: InterconnectChallenge,
    rank: int,
    root: bytes,
    request: OpenRequest,
    opening: Opening | None,
    expected: dict[int, np.ndarray],
) -> list[str]:
    where = f"rank {rank} ({challenge.endpoints[rank]})"
    if opening is None:
        return [f"{where}: no opening"]
    if opening.rank != rank or opening.challenge_id != request.challenge_id:
        return [f"{where}: opening for another rank or challenge"]
    if [c.index for c in opening.chunks] != request.chunks:
        return [f"{where}: opened chunks {[c.index for c in opening.chunks]}, asked {request.chunks}"]
    out = []
    for proof in opening.chunks:
        words = proof.chunk.to_numpy()
        if len(words) != challenge.chunk_len:
            out.append(f"{where}: chunk {proof.index} has {len(words)} words")
            continue
        leaf = leaf_hash(challenge.challenge_id, rank, proof.index, as_leaf_rows(words))
        implied = root_from_path(leaf, proof.index, challenge.chunks, [bytes.fromhex(h) for h in proof.path])
        if implied != root:
            out.append(f"{where}: chunk {proof.index} is not under the committed root")
        elif not np.array_equal(words, expected[proof.index]):
            out.append(f"{where}: chunk {proof.index} is not the sum of the shards")
    return out


def judge(
    challenge: InterconnectChallenge,
    started_at: float,
    arrivals: dict[int, Arrival],
    requests: dict[int, OpenRequest],
    openings: dict[int, Opening],
) -> InterconnectVerdict:
    """The verdict of one proof from the validator's stamps and the openings; never raises on input."""
    cpu0 = time.process_time()
    failures = _commit_failures(challenge, started_at, arrivals)
    wanted = sorted({i for request in requests.values() for i in request.chunks})
    sums = reduced_rows(challenge.master, challenge.world, wanted, challenge.chunk_len)
    expected = dict(zip(wanted, sums, strict=True))
    for rank, request in sorted(requests.items()):
        arrival = arrivals.get(rank)
        if arrival is not None:
            root = bytes.fromhex(arrival.commit.root)
            failures += _opening_failures(challenge, rank, root, request, openings.get(rank), expected)
    if len(requests) < challenge.world:
        failures.append(f"openings asked of {len(requests)} of {challenge.world} participants")
    complete = len(arrivals) == challenge.world
    interval = max(a.at for a in arrivals.values()) - started_at if complete else None
    passed = not failures and interval is not None and interval > 0
    bandwidth = challenge.link_bytes / interval / 1e9 if passed and interval else 0.0
    return InterconnectVerdict(
        passed=passed,
        interval_s=interval,
        link_bytes=challenge.link_bytes,
        bandwidth_gbs=bandwidth,
        failures=tuple(failures),
        verify_cpu_s=time.process_time() - cpu0,
    )


def commit_tree(challenge_id: bytes, rank: int, reduced: np.ndarray, threads: int = 4) -> MerkleTree:
    """The Merkle tree a participant commits to over its reduced int32 ``[chunks, chunk_len]``."""
    return MerkleTree(hash_rows(challenge_id, rank, as_leaf_rows(reduced), threads))
