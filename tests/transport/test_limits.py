"""Limits that keep a miner alive under abuse or load: body cap, admission order, saturation."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from bittensor import http_auth
from transport_helpers import EchoRequest, EchoResponse, build_server

from compute.transport import (
    Busy,
    MinerClient,
    PrioritySemaphore,
    RateLimiter,
    Rejected,
    ServerLimits,
    WalletError,
    load_wallet,
)


async def _raw_exchange(port: int, head: bytes, body_parts: list[bytes]) -> tuple[bytes, int]:
    """Send a request by hand; return (response bytes, how many body parts were written first)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = bytearray()

    async def read_all() -> None:
        try:
            while chunk := await reader.read(65536):
                received.extend(chunk)
        except ConnectionResetError:
            pass

    reading = asyncio.create_task(read_all())
    sent = 0
    try:
        writer.write(head)
        for part in body_parts:
            if received or reading.done():
                break  # the server has answered: stop offering the rest
            writer.write(part)
            await writer.drain()
            sent += 1
            await asyncio.sleep(0.001)
    except (ConnectionResetError, BrokenPipeError):
        pass
    await asyncio.wait_for(reading, 5)
    writer.close()
    return bytes(received), sent


@pytest.fixture
def small_miner(keys, start):
    miner = keys("miner")
    endpoint = start(
        build_server(miner, None, ServerLimits(max_body_bytes=64 * 1024, rate_per_s=100, burst=100))
    )
    return miner, int(endpoint.rsplit(":", 1)[1])


async def test_declared_oversized_body_is_refused_before_it_is_sent(small_miner):
    _, port = small_miner
    head = (
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000000\r\n\r\n"
    )
    data, _ = await _raw_exchange(port, head, [])
    assert data.startswith(b"HTTP/1.1 413")
    assert b"exceeds 65536 bytes" in data


async def test_chunked_oversized_body_is_cut_off_at_the_cap(small_miner):
    _, port = small_miner
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"a" * 16384
    part = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    parts = [part] * 640  # 10 MiB offered, cap is 64 KiB
    data, sent = await _raw_exchange(port, head, parts)
    assert data.startswith(b"HTTP/1.1 413")
    assert sent < 100, f"server let {sent} chunks in before refusing"


async def test_body_at_the_cap_is_accepted(small_miner, keys):
    miner, port = small_miner
    validator = keys("validator")
    async with MinerClient(validator) as client:
        # ~1000 chars of text: well under the cap, parsed fine
        resp = await client.request(
            f"127.0.0.1:{port}", miner.ss58, "/echo", EchoRequest(text="z" * 1000), EchoResponse
        )
    assert len(resp.text) == 1000


async def test_signed_but_oversized_body_via_client_is_413(keys, start):
    miner, validator = keys("miner"), keys("validator")
    endpoint = start(build_server(miner, None, ServerLimits(max_body_bytes=512)))
    async with MinerClient(validator) as client:
        with pytest.raises(Rejected) as exc:
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="q" * 900), EchoResponse)
    assert exc.value.status == 413 and exc.value.code == "too_large"


async def test_saturated_miner_admits_highest_stake_first():
    sem = PrioritySemaphore(1)
    order: list[str] = []
    await sem.acquire(0, 1)

    async def waiter(name: str, prio: float) -> None:
        async with sem.slot(prio, 2):
            order.append(name)
            await asyncio.sleep(0.01)

    tasks = [
        asyncio.create_task(waiter(n, p)) for n, p in [("low", 1), ("mid", 50), ("high", 1000), ("mid2", 50)]
    ]
    await asyncio.sleep(0.05)
    sem.release()
    await asyncio.gather(*tasks)
    assert order == ["high", "mid", "mid2", "low"]
    assert sem.in_use == 0 and sem.waiting == 0


async def test_waiter_times_out_with_busy_and_slot_is_not_leaked():
    sem = PrioritySemaphore(1, max_waiting=1)
    await sem.acquire(0, 1)
    with pytest.raises(Busy, match="no slot free"):
        await sem.acquire(10, 0.05)
    waiting = asyncio.create_task(sem.acquire(5, 1))
    await asyncio.sleep(0.01)
    with pytest.raises(Busy, match="already waiting"):
        await sem.acquire(10, 0.05)
    sem.release()
    await waiting
    sem.release()
    assert sem.in_use == 0
    await asyncio.wait_for(sem.acquire(0, 0.01), 1)


async def test_server_queue_timeout_returns_503(keys, start):
    miner, validator = keys("miner"), keys("validator")
    server = build_server(
        miner, None, ServerLimits(max_concurrency=1, queue_timeout_s=0.2, rate_per_s=100, burst=100)
    )

    @server.route("/hold", EchoRequest, EchoResponse)
    async def hold(req, caller):
        await asyncio.sleep(0.8)
        return EchoResponse(text="held", caller=caller.hotkey_ss58)

    endpoint = start(server)
    async with MinerClient(validator) as client:
        first = asyncio.create_task(
            client.request(endpoint, miner.ss58, "/hold", EchoRequest(text="x"), EchoResponse)
        )
        await asyncio.sleep(0.1)
        with pytest.raises(Rejected) as exc:
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)
        assert (await first).text == "held"
    assert exc.value.status == 503 and exc.value.code == "busy"


def test_token_bucket_refills_at_rate():
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=2, clock=lambda: now[0])
    assert [limiter.take("a"), limiter.take("a")] == [0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5)
    assert limiter.take("b") == 0.0  # buckets are per caller
    now[0] = 0.5
    assert limiter.take("a") == 0.0


def test_missing_wallet_fails_fast_with_coordinates(tmp_path):
    with pytest.raises(WalletError, match="wallet name='ghost' hotkey='default'"):
        load_wallet("ghost", "default", str(tmp_path))


@pytest.mark.slow
async def test_thousand_concurrent_requests_across_sixteen_miners(keys, start):
    validator = keys("validator")
    limits = ServerLimits(rate_per_s=10_000, burst=10_000, max_concurrency=256)
    miners = []
    for i in range(16):
        miner = keys(f"miner{i}")
        miners.append((start(build_server(miner, None, limits)), miner.ss58))
    started = time.monotonic()
    async with MinerClient(validator, timeout=30, max_concurrency=64) as client:
        results = await asyncio.gather(
            *[
                client.request(*miners[i % 16], "/echo", EchoRequest(text=f"n{i}"), EchoResponse)
                for i in range(1000)
            ],
            return_exceptions=True,
        )
    elapsed = time.monotonic() - started
    errors = [r for r in results if isinstance(r, Exception)]
    assert errors == [], errors[:3]
    assert [r.text for r in results] == [f"n{i}" for i in range(1000)]
    assert elapsed < 30


async def test_concurrent_replays_of_one_request_admit_exactly_one(keys, start):
    miner, validator = keys("miner"), keys("validator")
    endpoint = start(build_server(miner, None))
    body = b'{"text":"once"}'
    headers = http_auth.sign(validator, method="POST", path="/echo", body=body, receiver_ss58=miner.ss58)
    async with httpx.AsyncClient() as http:
        responses = await asyncio.gather(
            *[http.post(f"http://{endpoint}/echo", content=body, headers=headers) for _ in range(40)]
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [401] * 39
