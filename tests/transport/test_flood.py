"""A hostile address floods the server; a signed caller on another address is still served."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from transport_helpers import EchoRequest, EchoResponse, build_server

from compute.lab.harness.flood import flood_process, signed_latencies
from compute.transport import MinerClient, ServerLimits
from compute.transport.guard import ConnectionGuard, GuardLimits, RefusalLog, ThrottleFilter

# The header deadline stays above httpx's 5 s keep-alive expiry, so a pooled connection is never
# closed by the server just as the client reuses it; the body deadline is short to churn the flood.
FAST = ServerLimits(rate_per_s=1000, burst=1000, body_timeout_s=1.0)


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


@pytest.fixture
def served(keys, start):
    def serve(limits: ServerLimits = FAST):
        miner = keys("miner")
        server = build_server(miner, None, limits)
        return miner, start(server), server

    return serve


async def _flood_hits(server, refusals: int, within_s: float = 20.0) -> None:
    """Wait until the flood demonstrably reaches the server (slower to build on a loaded machine)."""
    deadline = time.monotonic() + within_s
    while sum(server.guard.refusals.totals.values()) <= refusals and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def _signed_calls(
    validator, miner, endpoint: str, count: int, mode: str, server
) -> tuple[list[float], int, int]:
    async with MinerClient(validator, timeout=5) as client:

        async def call() -> object:
            return await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="hi"), EchoResponse)

        await call()  # warm the client (imports, keys, pool) before anything is measured
        flood = flood_process(port_of(endpoint), connections=200, mode=mode, path="/echo", seconds=60)
        try:
            await _flood_hits(server, 100)  # the attacker process starts and builds its flood
            answered, failed = await signed_latencies(call, count, interval_s=0.05)
        finally:
            flood.kill()
            flood.join(5)
        return answered, failed


@pytest.mark.parametrize("mode", ["slow-body", "idle"])
@pytest.mark.slow
async def test_signed_calls_are_answered_during_a_flood_from_one_address(served, keys, mode):
    miner, endpoint, server = served()
    answered, failed = await _signed_calls(keys("validator"), miner, endpoint, 20, mode, server)
    assert failed == 0 and len(answered) == 20  # each within 5 s; the p95 figure is the benchmark's
    assert sum(server.guard.refusals.totals.values()) > 100  # the flood really hit the server


async def test_headers_that_never_finish_are_cut_at_the_header_deadline(served):
    _, endpoint, _ = served(ServerLimits(header_timeout_s=1.0))
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(endpoint))
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    assert 0.8 <= time.monotonic() - started <= 3.0
    writer.close()


async def test_a_body_that_never_finishes_gets_408_at_the_body_deadline(served):
    _, endpoint, _ = served()
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(endpoint))
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
    data = await asyncio.wait_for(reader.read(), 5)
    assert data.startswith(b"HTTP/1.1 408") and b"did not arrive within 1s" in data
    writer.close()


async def test_connections_over_the_per_address_cap_are_refused_with_503(served):
    _, endpoint, _ = served(ServerLimits(max_connections_per_ip=5, header_timeout_s=5.0))
    held = [await asyncio.open_connection("127.0.0.1", port_of(endpoint)) for _ in range(5)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(endpoint))
    assert (await asyncio.wait_for(reader.read(), 5)).startswith(b"HTTP/1.1 503")
    other, other_w = await asyncio.open_connection(
        "127.0.0.1", port_of(endpoint), local_addr=("127.0.0.3", 0)
    )
    other_w.write(b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await asyncio.wait_for(other.readuntil(b"\r\n"), 5)).startswith(b"HTTP/1.1 404")
    for _, w in [*held, (reader, writer), (other, other_w)]:
        w.close()


async def test_unauthenticated_requests_per_address_are_capped(served):
    _, endpoint, _ = served(ServerLimits(max_preauth_per_ip=2, body_timeout_s=5.0))
    port = port_of(endpoint)
    slow = []
    for _ in range(2):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
        slow.append(writer)
    await asyncio.sleep(0.3)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    data = await asyncio.wait_for(reader.read(), 5)
    assert data.startswith(b"HTTP/1.1 429") and b"unauthenticated requests in flight" in data
    for w in [*slow, writer]:
        w.close()


async def test_client_disconnects_log_no_traceback(served, caplog):
    _, endpoint, _ = served()
    caplog.set_level(logging.DEBUG)
    for _ in range(5):
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(endpoint))
        writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{")
        await writer.drain()
        writer.close()
    await asyncio.sleep(0.5)
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


def test_refusals_are_summarised_once_per_interval(caplog):
    now = [0.0]
    log = RefusalLog(10.0, clock=lambda: now[0])
    guard = ConnectionGuard(GuardLimits(max_connections_per_ip=1, connect_burst_per_ip=1e6), log)
    caplog.set_level(logging.WARNING, logger="compute.transport.guard")
    assert guard.admit("10.9.9.9")
    for _ in range(10_000):
        assert not guard.admit("10.9.9.9")
    now[0] = 11.0
    guard.admit("10.9.9.9")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "10000 connections (per-address cap)" in lines[1]


def test_throttle_filter_bounds_a_noisy_logger():
    throttle = ThrottleFilter(per_interval=3, interval_s=60)
    records = [
        logging.LogRecord("uvicorn.error", logging.WARNING, "", 0, "bad", None, None) for _ in range(100)
    ]
    assert sum(throttle.filter(r) for r in records) == 3


def test_nofile_limit_is_raised_to_the_hard_limit():
    import resource

    from compute.transport import raise_nofile_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    try:
        raised, told = raise_nofile_limit()
        assert raised == hard == told and resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(
    ("nofile", "total", "per_ip", "reserve"),
    [(1024, 512, 24, 128), (4096, 2048, 112, 256), (1048576, 2048, 112, 256), (300, 64, 8, 16)],
)
def test_connection_caps_fit_the_open_file_limit(nofile, total, per_ip, reserve):
    from compute.transport import GuardLimits, fit_to_nofile

    fitted = fit_to_nofile(GuardLimits(), nofile)
    assert (fitted.max_connections, fitted.max_connections_per_ip, fitted.known_reserve) == (
        total,
        per_ip,
        reserve,
    )
    assert fitted.backlog <= fitted.max_connections


def test_the_last_slots_are_kept_for_known_addresses():
    from compute.transport import GuardLimits

    guard = ConnectionGuard(GuardLimits(max_connections=10, known_reserve=3, max_connections_per_ip=100))
    admitted = [guard.admit(f"10.0.0.{i}") for i in range(9)]
    assert admitted == [True] * 7 + [False] * 2  # strangers stop at 10 - 3
    guard.trust("192.0.2.1")
    assert guard.admit("192.0.2.1") and guard.admit("192.0.2.1") and guard.admit("192.0.2.1")
    assert not guard.admit("192.0.2.1")  # the total cap holds for everyone
