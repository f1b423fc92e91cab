"""The timing process's stamps never go back (a regression seen in the three-validator demo).

Stamps are taken in asyncssh's ``data_received``, per packet; lines of one packet are tie-broken
1 us apart. Several packets of one socket read are delivered microseconds apart, so a packet's clock
could sit below the previous packet's tie-broken stamps: an honest memory chain's pass lines then
arrived "out of order" and its memory went unproven ("174 ordered pass arrivals for 174 passes").
"""

from __future__ import annotations

import asyncssh

from compute.validator.session import clock_child


def _stamps(channel: clock_child.Channel) -> list[float]:
    stamps = []
    while not channel.lines.empty():
        item = channel.lines.get_nowait()
        assert isinstance(item, tuple), item
        stamps.append(item[0])
    return stamps


def test_packets_delivered_in_the_same_instant_keep_their_lines_in_order(monkeypatch) -> None:
    monkeypatch.setattr(clock_child.time, "monotonic", lambda: 100.0)  # one read, one instant
    channel = clock_child.Channel()
    channel.data_received(b"".join(b'{"op":"pass","r":%d}\n' % r for r in range(5)), None)
    channel.data_received(b'{"op":"pass","r":5}\n{"op":"pass",', None)
    channel.data_received(b'"r":6}\n', asyncssh.EXTENDED_DATA_STDERR)  # stderr: no line, no stamp
    channel.data_received(b'"r":6}\n', None)
    stamps = _stamps(channel)
    assert len(stamps) == 7
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False)), stamps
    assert stamps[-1] - stamps[0] < 1e-5  # late by microseconds only


def test_a_later_packet_is_stamped_by_the_clock(monkeypatch) -> None:
    now = [100.0]
    monkeypatch.setattr(clock_child.time, "monotonic", lambda: now[0])
    channel = clock_child.Channel()
    channel.data_received(b"a\nb\n", None)
    now[0] = 100.5
    channel.data_received(b"c\n", None)
    assert _stamps(channel) == [100.0, 100.0 + clock_child.TIE_S, 100.5]


async def test_a_waiting_line_is_taken_at_once_and_a_silent_worker_times_out() -> None:
    """Lines already stamped are handed over without a timer; with none, the wait ends at its
    timeout as a "timeout" failure (the channel is not failed by it: a later line still comes)."""
    import asyncio
    import time

    import pytest

    channel = clock_child.Channel()
    channel.data_received(b'{"op":"memory_pass","ok":true,"gpu":0,"pass":1}\n', None)
    stamp, raw = await channel.line(0.0)  # a zero timeout would expire any timer at once
    assert raw.startswith(b'{"op":"memory_pass"') and stamp <= time.monotonic()
    started = time.monotonic()
    with pytest.raises(clock_child.Failure) as failed:
        await channel.line(0.2)
    assert failed.value.kind == "timeout" and 0.15 <= time.monotonic() - started < 2
    asyncio.get_running_loop().call_later(0.05, channel.data_received, b'{"op":"ping","ok":true}\n', None)
    _, raw = await channel.line(5)
    assert raw == b'{"op":"ping","ok":true}\n' and not channel.failed
