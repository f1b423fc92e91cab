"""Opening reply lines verified off the event loop: same reasons as the session, same verdicts as inline."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import numpy as np
import pytest

from compute.pog import Prover, choose_openings, new_challenge, offload, verify, verify_lines
from compute.pog.spool import SpooledLine
from compute.pog.wire import Opening
from compute.validator.proofs import offloaded
from compute.validator.session import worker_reply
from compute.validator.session.pog_session import WorkerFailed, WorkerProtocolError


@pytest.fixture(scope="module")
def honest():
    challenge = new_challenge("fp32", 64, 8192, 64, 2, rng=np.random.default_rng(40))
    prover = Prover("cpu")
    commitment = prover.commit(challenge)
    request = choose_openings(challenge, rng=np.random.default_rng(41))
    opening = prover.open(request)
    line = json.dumps({"ok": True, "op": "open", "opening": opening.model_dump(mode="json")}).encode()
    return challenge, commitment, request, opening, line + b"\n"


BROKEN = {
    "not json": b"not json\x1b[2J\n",
    "not an object": b"[1, 2]\n",
    "worker error": b'{"ok": false, "error": "boom\\u001b[31m"}\n',
    "worker error, no text": b'{"ok": false}\n',
    "another op": b'{"ok": true, "op": "commit"}\n',
    "opening missing": b'{"ok": true, "op": "open"}\n',
    "opening malformed": b'{"ok": true, "op": "open", "opening": {"challenge_id": 7}}\n',
    "nested past the bound": b'{"ok": true, "op": "open", "opening": ' + b"[" * 5000 + b"]" * 5000 + b"}\n",
}


def _session_error(line: bytes) -> Exception:
    """What the session's own parser (``worker_reply``) raises for ``line`` as an ``open`` reply."""
    try:
        worker_reply.parse_model(Opening, worker_reply.parse_reply(line, "open").get("opening"), "open")
    except (WorkerFailed, WorkerProtocolError) as exc:
        return exc
    raise AssertionError("the session accepted a broken line")


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_line_gets_the_sessions_own_reason_and_class(name: str, honest) -> None:
    """``offload`` (in the pool) and ``worker_reply`` (in the session) give a miner the same verdict text."""
    challenge, commitment, request, _, _ = honest
    line = BROKEN[name]
    expected = _session_error(line)
    with pytest.raises(offload.ReplyError) as caught:
        offload.verify_opening_line(line, "open", challenge, commitment, request)
    assert str(caught.value) == str(expected)
    assert caught.value.failed is isinstance(expected, WorkerFailed)
    assert "\x1b" not in str(caught.value)  # the miner's control characters never reach a log raw
    with pytest.raises(type(expected)) as mapped:  # the validator's proofs see the session's errors
        asyncio.run(offloaded.verify_opening(line, "open", challenge, commitment, request, 0))
    assert str(mapped.value) == str(expected)


def test_the_parse_errors_caught_are_the_sessions() -> None:
    assert set(offload.PARSE_ERRORS) == set(worker_reply.PARSE_ERRORS)


def test_deep_nesting_is_refused_before_the_parser_whatever_the_recursion_limit(honest) -> None:
    """A validator that imported web3 runs with a recursion limit of 100,000: the bound still holds."""
    challenge, commitment, request, _, _ = honest
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(offload.ReplyError, match="TooDeep"):
            offload.verify_opening_line(
                BROKEN["nested past the bound"], "open", challenge, commitment, request
            )
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("workers", [0, 1])
def test_an_honest_line_gets_the_inline_verdict_in_a_thread_and_in_the_pool(workers: int, honest) -> None:
    challenge, commitment, request, opening, line = honest
    inline = verify(challenge, commitment, request, opening)
    assert inline.ok
    for raw in (line, bytearray(line)):  # the session hands over its buffer without a copy
        verdict = asyncio.run(offloaded.verify_opening(raw, "open", challenge, commitment, request, workers))
        assert verdict == inline


def test_a_big_line_reaches_the_worker_through_a_file_that_is_always_removed(honest, monkeypatch) -> None:
    challenge, commitment, request, opening, line = honest
    big = line[:-1] + b" " * verify_lines.FILE_MIN_LINE + b"\n"  # JSON allows trailing whitespace
    written: list[str] = []
    real_write = verify_lines._write

    def recording_write(data: bytes | bytearray) -> str:
        written.append(real_write(data))
        return written[-1]

    monkeypatch.setattr(verify_lines, "_write", recording_write)
    verdict = asyncio.run(offloaded.verify_opening(big, "open", challenge, commitment, request, 1))
    assert verdict == verify(challenge, commitment, request, opening) and verdict.ok
    broken = b'{"ok": false, "error": "out of memory"}' + b" " * verify_lines.FILE_MIN_LINE + b"\n"
    with pytest.raises(WorkerFailed, match="out of memory"):
        asyncio.run(offloaded.verify_opening(broken, "open", challenge, commitment, request, 1))
    assert len(written) == 2 and not any(os.path.exists(path) for path in written)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_spooled_line_is_verified_from_its_file_which_is_always_removed(
    workers: int, honest, tmp_path
) -> None:
    """The timing process's spool file (``SpooledLine``): read by the worker (or a thread), never by
    the validator's process when a pool runs, and deleted whatever the verdict."""
    challenge, commitment, request, opening, line = honest
    big = line[:-1] + b" " * verify_lines.FILE_MIN_LINE + b"\n"
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_bytes(big)
    verdict = asyncio.run(
        offloaded.verify_opening(
            SpooledLine(str(good), len(big)), "open", challenge, commitment, request, workers
        )
    )
    assert verdict == verify(challenge, commitment, request, opening) and verdict.ok
    bad.write_bytes(b'{"ok": false, "error": "out of memory"}' + b" " * verify_lines.FILE_MIN_LINE + b"\n")
    with pytest.raises(WorkerFailed, match="out of memory"):
        spooled = SpooledLine(str(bad), bad.stat().st_size)
        asyncio.run(offloaded.verify_opening(spooled, "open", challenge, commitment, request, workers))
    assert not good.exists() and not bad.exists()
