"""The validator's session with the participants of one interconnect proof, on its own clock.

Each participant is a ``Channel``: a line pipe to an endpoint the validator itself opened (an SSH
session into a lease; a local process in tests). One reader thread per channel stamps every line
with the validator's clock the moment it is read, before any parsing, so the verdict's interval
is reveal -> last commitment as the validator saw it, whatever the participants report.

``prove``: reveal every participant's key (the clock starts before the first line is written),
collect commitments until all arrived or the deadline (plus a grace to name the late ones)
passed, then ask each participant for random chunks and judge (``judge.judge``). numpy and stdlib
only; no torch.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Protocol

from .judge import Arrival, InterconnectChallenge, InterconnectVerdict, choose_openings, judge
from .wire import (
    MAX_LINE_BYTES,
    Commit,
    Opening,
    Plain,
    PlainDone,
    Ready,
    Setup,
    WireError,
    encode,
    parse_to_validator,
)

log = logging.getLogger(__name__)


class Channel(Protocol):
    endpoint: str  # what the validator reached: never what the participant says it is

    def send(self, line: str) -> None: ...
    def readline(self) -> bytes: ...  # b"" at end of stream


@dataclass
class PipeChannel:
    """A channel over two binary pipes (a subprocess's stdin/stdout, an SSH session's)."""

    endpoint: str
    writer: IO[bytes]
    reader: IO[bytes]

    def send(self, line: str) -> None:
        self.writer.write(line.encode())
        self.writer.flush()

    def readline(self) -> bytes:
        return self.reader.readline(MAX_LINE_BYTES + 1)


@dataclass(frozen=True)
class PlainResult:
    interval_s: float  # validator's clock: request -> last reply
    reduce_s: float  # the slowest participant's own timing of its all-reduce (advisory)


class InterconnectSession:
    def __init__(self, channels: list[Channel], clock: Callable[[], float] = time.monotonic) -> None:
        self.channels, self.clock = channels, clock
        self.last_commits: dict[int, Commit] = {}  # the last proof's commitments (their advisory phases)
        self.lines: queue.Queue[tuple[int, float, bytes]] = queue.Queue()
        self.closed: set[int] = set()  # ranks whose channel ended: nothing more is waited for from them
        for rank, channel in enumerate(channels):
            threading.Thread(
                target=self._read, args=(rank, channel), daemon=True, name=f"ic-read-{rank}"
            ).start()

    def _read(self, rank: int, channel: Channel) -> None:
        while True:
            try:
                line = channel.readline()
            except (OSError, ValueError):
                line = b""
            self.lines.put((rank, self.clock(), line))  # stamped before anything looks at it
            if not line:
                return

    def _collect(
        self, want: type, until: float, ranks: set[int], challenge_id: str | None = None
    ) -> dict[int, tuple[float, object]]:
        """The first ``want`` message per rank in ``ranks`` read before ``until`` (validator's clock).

        With ``challenge_id``, a message of another challenge (a stale answer to an earlier proof)
        is skipped, not taken for this one's.
        """
        got: dict[int, tuple[float, object]] = {}
        while not ranks <= set(got) | self.closed:
            left = until - self.clock()
            if left <= 0:
                break
            try:
                rank, at, line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if not line:
                self.closed.add(rank)
                log.info(
                    "interconnect: rank=%d endpoint=%s closed its channel", rank, self.channels[rank].endpoint
                )
                continue
            try:
                message = parse_to_validator(line)
            except WireError as exc:
                log.info(
                    "interconnect: rank=%d endpoint=%s sent a bad line: %s",
                    rank,
                    self.channels[rank].endpoint,
                    exc,
                )
                continue
            if challenge_id is not None and getattr(message, "challenge_id", challenge_id) != challenge_id:
                log.info("interconnect: rank=%d sent an answer to another challenge", rank)
                continue
            if isinstance(message, want) and rank in ranks and rank not in got:
                got[rank] = (at, message)
        return got

    def setup(
        self, init_method: str, device: str = "auto", timeout_s: float = 60.0, **extra: int
    ) -> list[Ready]:
        """Every participant joins the process group (untimed); their ``Ready`` in rank order."""
        world = len(self.channels)
        for rank, channel in enumerate(self.channels):
            channel.send(
                encode(Setup(rank=rank, world=world, init_method=init_method, device=device, **extra))
            )
        got = self._collect(Ready, self.clock() + timeout_s, set(range(world)))
        missing = sorted(set(range(world)) - set(got))
        if missing:
            gone = sorted(set(missing) & self.closed)
            raise TimeoutError(
                f"participants {missing} did not join within {timeout_s:g} s"
                + (f" ({gone} ended their channel)" if gone else "")
            )
        return [got[rank][1] for rank in range(world)]  # type: ignore[misc]

    def prove(self, challenge: InterconnectChallenge, open_timeout_s: float = 30.0) -> InterconnectVerdict:
        """Reveal, collect commitments on the clock, open random chunks, judge."""
        ranks = set(range(challenge.world))
        cid = challenge.challenge_id.hex()
        early = self._drain(cid)  # anything already waiting came before the reveal
        started = self.clock()
        for rank, channel in enumerate(self.channels):
            channel.send(encode(challenge.reveal(rank)))
        grace = min(1.0, challenge.deadline_s)
        commits = self._collect(Commit, started + challenge.deadline_s + grace, ranks, cid)
        arrivals = {rank: Arrival(message, at) for rank, (at, message) in commits.items()}  # type: ignore[arg-type]
        arrivals.update({rank: Arrival(message, at) for rank, (at, message) in early.items()})
        self.last_commits = {rank: a.commit for rank, a in arrivals.items()}
        requests = choose_openings(challenge)
        for rank, channel in enumerate(self.channels):
            channel.send(encode(requests[rank]))
        replies = self._collect(Opening, self.clock() + open_timeout_s, ranks, cid)
        openings = {rank: message for rank, (_, message) in replies.items()}
        verdict = judge(challenge, started, arrivals, requests, openings)  # type: ignore[arg-type]
        log.info(
            "interconnect: world=%d passed=%s interval=%s bandwidth=%.3f GB/s failures=%s",
            challenge.world,
            verdict.passed,
            verdict.interval_s,
            verdict.bandwidth_gbs,
            list(verdict.failures),
        )
        return verdict

    def _drain(self, challenge_id: str) -> dict[int, tuple[float, Commit]]:
        """This challenge's commitments read before its reveal (its id leaked): kept, to fail them by
        name; stale lines of earlier proofs are dropped."""
        early: dict[int, tuple[float, Commit]] = {}
        while True:
            try:
                rank, at, line = self.lines.get_nowait()
            except queue.Empty:
                return early
            try:
                message = parse_to_validator(line) if line else None
            except WireError:
                continue
            if isinstance(message, Commit) and message.challenge_id == challenge_id and rank not in early:
                early[rank] = (at, message)

    def plain(self, words: int, timeout_s: float = 60.0) -> PlainResult:
        """A plain all-reduce of ``words`` int32 on the same process group, timed the same way."""
        ranks = set(range(len(self.channels)))
        started = self.clock()
        for channel in self.channels:
            channel.send(encode(Plain(words=words)))
        done = self._collect(PlainDone, started + timeout_s, ranks)
        if set(done) != ranks:
            raise TimeoutError(f"plain all-reduce: {sorted(ranks - set(done))} did not answer")
        return PlainResult(
            interval_s=max(at for at, _ in done.values()) - started,
            reduce_s=max(message.reduce_s for _, message in done.values()),  # type: ignore[attr-defined]
        )
