"""The userspace WAN of the demo and the distance tests: delay + jitter per direction, order kept."""

from __future__ import annotations

import asyncio
import random
import sys
import time

import pytest

from compute.localnet.latency_proxy import PROXY_SCRIPT, Delay


def test_release_times_keep_order_and_stay_within_the_jitter() -> None:
    delay = Delay(0.1, 0.2, random.Random(7))
    now, last = 0.0, 0.0
    for _ in range(1000):
        now += random.Random(now).uniform(0, 0.01)
        at = delay.release_at(now)
        assert at >= last  # a stream is never reordered
        assert at >= now + 0.08  # never sooner than one-way x (1 - jitter)
        last = at


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()
    writer.close()


@pytest.mark.slow
async def test_the_proxy_adds_the_round_trip_and_keeps_the_stream_intact() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROXY_SCRIPT),
        "--rtt-ms",
        "200",
        "--jitter",
        "0.2",
        "--seed",
        "1",
        "127.0.0.1",
        str(port),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proxy.stdin is not None and proxy.stdout is not None
    trips = []
    for i in range(10):
        started = time.monotonic()
        proxy.stdin.write(b"ping %d\n" % i)
        await proxy.stdin.drain()
        assert await asyncio.wait_for(proxy.stdout.readline(), 10) == b"ping %d\n" % i
        trips.append(time.monotonic() - started)
    burst = b"".join(b"line %d\n" % i for i in range(2000))
    proxy.stdin.write(burst)
    await proxy.stdin.drain()
    echoed = await asyncio.wait_for(proxy.stdout.readexactly(len(burst)), 20)
    proxy.stdin.close()
    await asyncio.wait_for(proxy.wait(), 10)
    server.close()
    assert echoed == burst  # every byte, in order
    assert 0.16 <= min(trips) and sorted(trips)[5] < 0.35, trips  # 200 ms +/- 20 %, plus a loaded box


def test_a_bad_jitter_is_refused() -> None:
    from compute.localnet.latency_proxy import main

    with pytest.raises(SystemExit):
        main(["--rtt-ms", "10", "--jitter", "2", "127.0.0.1", "1"])
