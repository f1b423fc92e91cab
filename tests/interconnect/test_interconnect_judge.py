"""The interconnect proof's validator side, numpy only: shards, the verdict, and each cheat it fails.

The cluster here is simulated in process (``Honest``: the all-reduce is the numpy sum every
participant would hold); the real multi-process gloo runs are in test_interconnect_gloo.py.
"""

from __future__ import annotations

import dataclasses
import queue
import time

import numpy as np
import pytest

from compute.interconnect import (
    Arrival,
    InterconnectError,
    InterconnectSession,
    choose_openings,
    commit_tree,
    judge,
    new_challenge,
    participant_key,
    reduced_rows,
    shard_rows,
)
from compute.interconnect.wire import (
    ChunkProof,
    Commit,
    Int32Chunk,
    Opening,
    OpenRequest,
    Ready,
    Reveal,
    Setup,
    WireError,
    encode,
    parse_to_participant,
    parse_to_validator,
)

ENDPOINTS = ("hostA:22", "hostB:22", "hostC:22")


def _challenge(**kw):
    return new_challenge(ENDPOINTS, vector_bytes=64 * 256 * 4, deadline_s=5.0, chunk_len=256, **kw)


def test_shard_rows_anywhere_are_the_same_words() -> None:
    key = participant_key(bytes(16), 2)
    whole = shard_rows(key, 0, 40, 64)
    assert np.array_equal(shard_rows(key, 17, 5, 64), whole[17:22])
    assert whole.dtype == np.int32 and len(np.unique(whole)) == whole.size  # full 32-bit words


def test_participants_have_distinct_keys_and_shards() -> None:
    keys = {participant_key(b"k" * 16, r) for r in range(8)}
    assert len(keys) == 8
    assert not np.array_equal(
        shard_rows(participant_key(b"k" * 16, 0), 0, 1, 64),
        shard_rows(participant_key(b"k" * 16, 1), 0, 1, 64),
    )


def test_reduction_wraps_mod_2_32_and_any_order_gives_the_same_bits() -> None:
    master, world, idx = b"m" * 16, 5, [0, 3, 9]
    shards = [shard_rows(participant_key(master, r), 0, 10, 32) for r in range(world)]
    with np.errstate(over="ignore"):
        forward = np.zeros((10, 32), np.int32)
        for s in shards:
            forward += s
        backward = np.zeros((10, 32), np.int32)
        for s in reversed(shards):
            backward += s
    exact = (sum(s.astype(np.int64) for s in shards) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    assert np.array_equal(forward, backward) and np.array_equal(forward, exact)
    assert np.array_equal(reduced_rows(master, world, idx, 32), exact[idx])


class Cluster:
    """Honest participants in process: each holds the true sum and its own tree."""

    def __init__(self, challenge, master: bytes | None = None) -> None:
        self.ch = challenge
        master = master or challenge.master
        total = np.zeros((challenge.chunks, challenge.chunk_len), np.int32)
        with np.errstate(over="ignore"):
            for r in range(challenge.world):
                total += shard_rows(participant_key(master, r), 0, challenge.chunks, challenge.chunk_len)
        self.vector = total
        self.trees = [commit_tree(challenge.challenge_id, r, total) for r in range(challenge.world)]

    def commit(self, rank: int, as_rank: int | None = None) -> Commit:
        return Commit(
            challenge_id=self.ch.challenge_id.hex(),
            rank=rank,
            root=self.trees[as_rank if as_rank is not None else rank].root.hex(),
        )

    def opening(self, rank: int, request: OpenRequest, as_rank: int | None = None) -> Opening:
        tree = self.trees[as_rank if as_rank is not None else rank]
        proofs = [
            ChunkProof(
                index=i, chunk=Int32Chunk.from_numpy(self.vector[i]), path=[h.hex() for h in tree.path(i)]
            )
            for i in request.chunks
        ]
        return Opening(challenge_id=request.challenge_id, rank=rank, chunks=proofs)


def _run(challenge, cluster, at=None, commits=None, openings=None):
    requests = choose_openings(challenge)
    arrivals = {
        r: Arrival(c, (at or {}).get(r, 0.5))
        for r, c in (commits or {r: cluster.commit(r) for r in range(challenge.world)}).items()
    }
    opened = (
        openings(requests)
        if openings
        else {r: cluster.opening(r, requests[r]) for r in range(challenge.world)}
    )
    return judge(challenge, 0.0, arrivals, requests, opened)


def test_honest_cluster_passes_with_ring_bytes_over_the_interval() -> None:
    ch = _challenge()
    verdict = _run(ch, Cluster(ch), at={0: 0.2, 1: 0.5, 2: 0.4})
    assert verdict.passed and verdict.failures == ()
    assert verdict.interval_s == 0.5
    assert verdict.link_bytes == 2 * 2 / 3 * 64 * 256 * 4
    assert verdict.bandwidth_gbs == pytest.approx(verdict.link_bytes / 0.5 / 1e9)


def test_one_endpoint_named_for_several_participants_is_refused() -> None:
    with pytest.raises(InterconnectError, match="hostA:22"):
        new_challenge(("hostA:22", "hostB:22", "hostA:22"), 1 << 20, 5.0)


def test_one_process_answering_for_another_rank_fails() -> None:
    """Rank 2's endpoint replays rank 0's commitment and openings: same root, leaves bound to rank 0."""
    ch = _challenge()
    cl = Cluster(ch)
    commits = {0: cl.commit(0), 1: cl.commit(1), 2: cl.commit(2, as_rank=0)}

    def openings(requests):
        return {
            0: cl.opening(0, requests[0]),
            1: cl.opening(1, requests[1]),
            2: cl.opening(2, requests[2], as_rank=0),
        }

    verdict = _run(ch, cl, commits=commits, openings=openings)
    assert not verdict.passed and verdict.bandwidth_gbs == 0.0
    assert "the same root committed for several participants" in verdict.failures
    assert any("rank 2" in f and "not under the committed root" in f for f in verdict.failures)


def test_commitment_under_another_rank_is_a_wrong_identity() -> None:
    ch = _challenge()
    cl = Cluster(ch)
    verdict = _run(ch, cl, commits={0: cl.commit(0), 1: cl.commit(2), 2: cl.commit(2)})
    assert not verdict.passed
    assert any(f.startswith("rank 1 ") and "names rank 2" in f for f in verdict.failures)


def test_result_from_a_wrong_seed_fails_the_openings() -> None:
    """Precomputed before the reveal: any seed but the revealed one gives other words."""
    ch = _challenge()
    verdict = _run(ch, Cluster(ch, master=b"guessed-seed-123"))
    assert not verdict.passed
    assert (
        all("is not the sum of the shards" in f for f in verdict.failures) and len(verdict.failures) == 3 * 4
    )


def test_commitment_before_the_reveal_fails() -> None:
    ch = _challenge()
    verdict = _run(ch, Cluster(ch), at={1: -0.01})
    assert not verdict.passed and verdict.failures == ("rank 1 (hostB:22): committed before the reveal",)


def test_late_commitment_fails() -> None:
    ch = _challenge()
    verdict = _run(ch, Cluster(ch), at={2: 5.25})
    assert not verdict.passed and verdict.failures == ("rank 2 (hostC:22): late by 0.250 s",)


def test_result_computed_after_the_clock_stopped_fails() -> None:
    """A root sent in time, the vector computed afterwards: the openings do not lead to that root."""
    ch = _challenge()
    cl = Cluster(ch)
    fake = Commit(challenge_id=ch.challenge_id.hex(), rank=1, root="ab" * 32)
    verdict = _run(ch, cl, commits={0: cl.commit(0), 1: fake, 2: cl.commit(2)})
    assert not verdict.passed
    assert all("rank 1" in f and "not under the committed root" in f for f in verdict.failures)


def test_missing_commitment_and_opening_fail() -> None:
    ch = _challenge()
    cl = Cluster(ch)
    verdict = _run(
        ch, cl, commits={0: cl.commit(0), 1: cl.commit(1)}, openings=lambda rq: {0: cl.opening(0, rq[0])}
    )
    assert not verdict.passed and verdict.interval_s is None
    assert "rank 2 (hostC:22): no commitment" in verdict.failures
    assert "rank 1 (hostB:22): no opening" in verdict.failures


def test_tampered_chunk_fails() -> None:
    ch = _challenge()
    cl = Cluster(ch)

    def openings(requests):
        out = {r: cl.opening(r, requests[r]) for r in range(3)}
        bad = cl.vector[requests[0].chunks[0]].copy()
        bad[7] ^= 1
        first = out[0].chunks[0].model_copy(update={"chunk": Int32Chunk.from_numpy(bad)})
        out[0] = out[0].model_copy(update={"chunks": [first, *out[0].chunks[1:]]})
        return out

    verdict = _run(ch, cl, openings=openings)
    assert (
        not verdict.passed
        and len(verdict.failures) == 1
        and "not under the committed root" in verdict.failures[0]
    )


def test_wire_refuses_malformed_lines() -> None:
    with pytest.raises(WireError):
        parse_to_validator('{"kind": "interconnect.commit", "challenge_id": "00", "rank": 0, "root": "zz"}')
    with pytest.raises(WireError):
        parse_to_validator('{"kind": "interconnect.ready", "rank": 0, "device": "cpu", "extra": 1}')
    short = Int32Chunk.from_numpy(np.arange(4, dtype=np.int32)).data
    with pytest.raises(ValueError):
        Int32Chunk(length=5, data=short)


class FakeChannel:
    """An in-process participant over lines (numpy): honest unless the test scripts otherwise."""

    def __init__(self, endpoint: str, cluster_state: dict) -> None:
        self.endpoint, self.state = endpoint, cluster_state
        self.out: queue.Queue[bytes] = queue.Queue()
        self.rank = -1
        self.hold = 0.0  # seconds to sit on the commitment

    def push(self, line: str) -> None:
        self.out.put(line.encode())

    def readline(self) -> bytes:
        return self.out.get()

    def send(self, line: str) -> None:
        msg = parse_to_participant(line)
        if isinstance(msg, Setup):
            self.rank = msg.rank
            self.push(encode(Ready(rank=msg.rank, device="cpu")))
        elif isinstance(msg, Reveal):
            self.state.setdefault("keys", {})[msg.rank] = msg
            if len(self.state["keys"]) == self.state["world"]:
                self.state["ready"] = True
        elif isinstance(msg, OpenRequest):
            cl = self.state["cluster"]
            self.push(encode(cl.opening(self.rank, msg)))

    def commit_now(self) -> None:
        if self.hold:
            time.sleep(self.hold)
        self.push(encode(self.state["cluster"].commit(self.rank)))


def _fake_session(ch):
    state: dict = {"world": ch.world, "cluster": Cluster(ch)}
    chans = [FakeChannel(e, state) for e in ch.endpoints]
    session = InterconnectSession(chans)
    session.setup("tcp://127.0.0.1:1", timeout_s=5)
    return session, chans


def test_session_stamps_commitments_on_its_own_clock_and_passes_honest() -> None:
    ch = _challenge()
    session, chans = _fake_session(ch)
    orig = chans[2].send

    def send(line: str) -> None:  # the last reveal triggers every commitment
        orig(line)
        if parse_to_participant(line).kind == "interconnect.reveal":
            for c in chans:
                c.commit_now()

    chans[2].send = send  # type: ignore[method-assign]
    verdict = session.prove(ch)
    assert verdict.passed and 0 < verdict.interval_s < 1.0  # type: ignore[operator]


def test_session_fails_a_commitment_sent_before_the_reveal() -> None:
    ch = _challenge()
    session, chans = _fake_session(ch)
    chans[0].commit_now()  # precomputed: waiting in the pipe before the clock starts
    time.sleep(0.05)
    verdict = session.prove(dataclasses.replace(ch, deadline_s=0.2))
    assert not verdict.passed
    assert "rank 0 (hostA:22): committed before the reveal" in verdict.failures
    assert "rank 1 (hostB:22): no commitment" in verdict.failures


def test_the_validator_side_never_imports_torch() -> None:
    import subprocess
    import sys

    code = "import sys, compute.interconnect; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_participant_whose_channel_ends_is_not_waited_for() -> None:
    """A participant that exits (no torch, a crash) ends its channel: setup says so at once instead
    of waiting out its timeout, and a proof fails that rank as missing without waiting either."""
    ch = _challenge()
    state: dict = {"world": ch.world, "cluster": Cluster(ch)}
    chans = [FakeChannel(e, state) for e in ch.endpoints]
    chans[1].send = lambda line: chans[1].out.put(b"")  # type: ignore[method-assign]
    session = InterconnectSession(chans)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"participants \[1\] did not join within 30 s \(\[1\] ended"):
        session.setup("tcp://127.0.0.1:1", timeout_s=30)
    assert time.monotonic() - started < 5

    session, chans = _fake_session(ch)
    chans[0].out.put(b"")  # rank 0 ends after joining
    orig = chans[2].send

    def send(line: str) -> None:
        orig(line)
        if parse_to_participant(line).kind == "interconnect.reveal":
            for c in chans[1:]:
                c.commit_now()

    chans[2].send = send  # type: ignore[method-assign]
    started = time.monotonic()
    verdict = session.prove(dataclasses.replace(ch, deadline_s=20.0), open_timeout_s=20.0)
    assert not verdict.passed and any(f.startswith("rank 0") for f in verdict.failures), verdict.failures
    assert time.monotonic() - started < 5
