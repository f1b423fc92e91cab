"""The interconnect proof with real participants: three processes all-reducing over gloo on 127.0.0.1.

Cheats are played on the line between validator and a real participant (``Tap``), so the
participants run the product's code unchanged: a participant that computes with another seed than
the revealed one, and one whose commitment arrives after the clock stopped.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

pytest.importorskip("torch")

from compute.interconnect import InterconnectSession, local_participants, new_challenge  # noqa: E402
from compute.interconnect.wire import Reveal, encode, parse_to_participant  # noqa: E402

pytestmark = pytest.mark.slow


class Tap:
    """A channel passed through, with the cheats a test switches on."""

    def __init__(self, inner) -> None:  # noqa: ANN001 - a PipeChannel
        self.inner, self.endpoint = inner, inner.endpoint
        self.swap_key = False
        self.delay_commit_s = 0.0

    def send(self, line: str) -> None:
        message = parse_to_participant(line)
        if self.swap_key and isinstance(message, Reveal):
            line = encode(message.model_copy(update={"key": "00" * 16}))  # precomputed / guessed seed
        self.inner.send(line)

    def readline(self) -> bytes:
        line = self.inner.readline()
        if self.delay_commit_s and b'"interconnect.commit"' in line:
            time.sleep(self.delay_commit_s)  # the answer reaches the validator after its clock stopped
        return line


@pytest.fixture(scope="module")
def cluster():
    with local_participants(3) as (channels, init):
        taps = [Tap(c) for c in channels]
        session = InterconnectSession(taps)  # type: ignore[arg-type]
        readies = session.setup(init, device="cpu", timeout_s=90)
        assert [r.rank for r in readies] == [0, 1, 2] and {r.device for r in readies} == {"cpu"}
        yield session, taps


def _challenge(taps, **kw):
    return new_challenge(
        [t.endpoint for t in taps], vector_bytes=1 << 20, deadline_s=10.0, chunk_len=1024, **kw
    )


def test_honest_gloo_ring_passes_and_is_as_fast_as_its_interval(cluster) -> None:
    session, taps = cluster
    challenge = _challenge(taps)
    verdict = session.prove(challenge)
    assert verdict.passed, verdict.failures
    assert verdict.bandwidth_gbs == pytest.approx(challenge.link_bytes / verdict.interval_s / 1e9)
    assert session.plain(challenge.chunks * challenge.chunk_len).interval_s > 0


def test_participant_with_a_wrong_seed_fails_every_opening(cluster) -> None:
    session, taps = cluster
    taps[1].swap_key = True
    try:
        verdict = session.prove(_challenge(taps))
    finally:
        taps[1].swap_key = False
    assert not verdict.passed and verdict.bandwidth_gbs == 0.0
    assert verdict.failures and all("is not the sum of the shards" in f for f in verdict.failures)


def test_commitment_after_the_clock_stopped_fails(cluster) -> None:
    session, taps = cluster
    taps[2].delay_commit_s = 0.45  # past the 0.3 s deadline, inside the session's grace (0.3 s more)
    try:
        verdict = session.prove(dataclasses.replace(_challenge(taps), deadline_s=0.3))
    finally:
        taps[2].delay_commit_s = 0.0
    assert not verdict.passed
    rank2 = [f for f in verdict.failures if f.startswith(f"rank 2 ({taps[2].endpoint}): ")]
    assert rank2 and ("late by" in rank2[0] or "no commitment" in rank2[0])  # past the grace: not seen


def test_a_stale_answer_from_an_earlier_proof_does_not_fail_the_next(cluster) -> None:
    """Runs after the late commitment above: that answer, still in the pipe, belongs to another id."""
    session, taps = cluster
    verdict = session.prove(_challenge(taps))
    assert verdict.passed, verdict.failures
