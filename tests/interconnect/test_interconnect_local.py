"""``local_participants``: what it names, and that a failed run leaves no participant waiting.

Participants stand in for processes that would block (a rendezvous that never completes): each is
``sleep`` behind the wrapper, so closing its stdin does not end it; only a kill does.
"""

from __future__ import annotations

import os
import time

import pytest

from compute.interconnect import local_participants

BLOCKED = ["sh", "-c", "exec sleep 30", "sh"]  # the participant's command lands in $1..., ignored


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_names_and_port_are_the_callers() -> None:
    with local_participants(2, wrappers=[BLOCKED] * 2, names=["a", "b"], port=29555, grace_s=0.0) as (
        channels,
        init,
    ):
        assert [c.endpoint for c in channels] == ["a", "b"] and init == "tcp://127.0.0.1:29555"


def test_an_error_inside_kills_the_participants_at_once() -> None:
    started, pids = time.monotonic(), []
    with (
        pytest.raises(TimeoutError),
        local_participants(2, wrappers=[BLOCKED] * 2, grace_s=20.0) as (channels, _),
    ):
        pids = [int(c.endpoint.split(":")[1]) for c in channels]
        raise TimeoutError("the rendezvous never completed")
    assert time.monotonic() - started < 5.0  # not the 20 s grace of a clean exit
    assert not any(_alive(pid) for pid in pids)


def test_a_clean_exit_gives_them_the_grace_then_kills() -> None:
    started = time.monotonic()
    with local_participants(1, wrappers=[BLOCKED], grace_s=0.5) as (channels, _):
        pid = int(channels[0].endpoint.split(":")[1])
    assert 0.5 <= time.monotonic() - started < 5.0 and not _alive(pid)
