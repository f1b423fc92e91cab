"""End-to-end signed calls: real wallets, real uvicorn on 127.0.0.1, real httpx."""

from __future__ import annotations

import time

import httpx
import pytest
from bittensor import http_auth
from transport_helpers import EchoRequest, EchoResponse, build_server, neuron, snapshot

from compute.protocol import HealthRequest, HealthResponse
from compute.transport import (
    HEADER_RESPONSE_SIGNATURE,
    AccessPolicy,
    BadResponseSignature,
    InvalidResponse,
    MinerClient,
    PeerUnreachable,
    Rejected,
    RequestTimeout,
    ServerLimits,
    verify_response,
)


@pytest.fixture
def net(keys, start):
    """A miner that admits one staked validator; returns (miner, validator, endpoint, server)."""
    miner, validator = keys("miner"), keys("validator")
    policy = AccessPolicy(
        lambda: snapshot(neuron(0, miner, 0.0, False), neuron(1, validator, 5000.0)),
        min_stake=1000.0,
        require_permit=True,
    )
    server = build_server(miner, policy)
    return miner, validator, start(server), server


def signed(wallet, path, body, receiver, **kw):
    headers = http_auth.sign(wallet, method="POST", path=path, body=body, receiver_ss58=receiver, **kw)
    headers["Content-Type"] = "application/json"
    return headers


async def test_valid_call_returns_typed_response_from_authenticated_caller(net):
    miner, validator, endpoint, _ = net
    async with MinerClient(validator) as client:
        resp = await client.request(
            endpoint, miner.ss58, "/echo", EchoRequest(text="ab", count=2), EchoResponse
        )
    assert resp == EchoResponse(text="abab", caller=validator.ss58)


async def test_protocol_call_uses_route_for(keys, start):
    miner, validator = keys("miner"), keys("validator")
    server = build_server(miner, None)

    @server.route("/v1/health", HealthRequest, HealthResponse)
    async def health(req, caller):
        return HealthResponse(
            version="1.0.0", hotkey=miner.ss58, backend="embedded", uptime_s=1.0, active_leases=0, free_gpus=2
        )

    endpoint = start(server)
    async with MinerClient(validator) as client:
        resp = await client.call(endpoint, miner.ss58, HealthRequest())
    assert isinstance(resp, HealthResponse) and resp.free_gpus == 2 and resp.hotkey == miner.ss58


async def test_response_signature_binds_nonce_and_body(net):
    miner, validator, endpoint, _ = net
    body = EchoRequest(text="x").model_dump_json().encode()
    headers = signed(validator, "/echo", body, miner.ss58)
    resp = httpx.post(f"http://{endpoint}/echo", content=body, headers=headers)
    nonce = int(headers[http_auth.HEADER_NONCE])
    sig = resp.headers[HEADER_RESPONSE_SIGNATURE]
    assert resp.status_code == 200
    assert verify_response(miner.ss58, nonce, resp.content, sig)
    assert not verify_response(miner.ss58, nonce + 1, resp.content, sig)
    assert not verify_response(miner.ss58, nonce, resp.content + b" ", sig)
    assert not verify_response(validator.ss58, nonce, resp.content, sig)


async def test_replayed_request_is_refused(net):
    miner, validator, endpoint, _ = net
    body = EchoRequest(text="x").model_dump_json().encode()
    headers = signed(validator, "/echo", body, miner.ss58)
    first = httpx.post(f"http://{endpoint}/echo", content=body, headers=headers)
    second = httpx.post(f"http://{endpoint}/echo", content=body, headers=headers)
    assert first.status_code == 200
    assert second.status_code == 401
    assert second.json()["reason"].startswith("replayed request")


async def test_tampered_body_is_refused(net):
    miner, validator, endpoint, _ = net
    headers = signed(validator, "/echo", b'{"text":"pay 1"}', miner.ss58)
    resp = httpx.post(f"http://{endpoint}/echo", content=b'{"text":"pay 9"}', headers=headers)
    assert resp.status_code == 401
    assert resp.json()["reason"].startswith("bad signature")


async def test_stale_request_is_refused(net):
    miner, validator, endpoint, _ = net
    body = b'{"text":"x"}'
    old = time.time_ns() - 30 * 10**9  # signed honestly, 30 s ago (window is 10 s)
    resp = httpx.post(
        f"http://{endpoint}/echo",
        content=body,
        headers=signed(validator, "/echo", body, miner.ss58, nonce_ns=old),
    )
    assert resp.status_code == 401
    assert resp.json()["reason"].startswith("stale request")
    future = time.time_ns() + 30 * 10**9
    resp = httpx.post(
        f"http://{endpoint}/echo",
        content=body,
        headers=signed(validator, "/echo", body, miner.ss58, nonce_ns=future),
    )
    assert resp.status_code == 401 and "future" in resp.json()["reason"]


async def test_request_signed_for_another_miner_is_misdirected(net, keys):
    miner, validator, endpoint, _ = net
    other = keys("other-miner")
    body = b'{"text":"x"}'
    resp = httpx.post(
        f"http://{endpoint}/echo", content=body, headers=signed(validator, "/echo", body, other.ss58)
    )
    assert resp.status_code == 421
    assert resp.json()["reason"].startswith("wrong receiver")


async def test_unsigned_request_is_refused(net):
    _, _, endpoint, _ = net
    resp = httpx.post(f"http://{endpoint}/echo", content=b'{"text":"x"}')
    assert resp.status_code == 401
    assert resp.json() == {
        "protocol_version": 1,
        "kind": "error",
        "code": "unauthorized",
        "reason": "unsigned request: btauth/1 headers are missing",
    }
    assert HEADER_RESPONSE_SIGNATURE not in resp.headers


async def test_malformed_json_and_wrong_fields_get_422_with_reasons(net):
    miner, validator, endpoint, _ = net
    for body, expect in [
        (b'{"text": "x"', "Invalid JSON"),
        (b'{"text": "x", "admin": true}', "admin: Extra inputs are not permitted"),
        (b'{"text": "x", "count": 99}', "count: Input should be less than or equal to 10"),
        (b"{}", "text: Field required"),
    ]:
        resp = httpx.post(
            f"http://{endpoint}/echo", content=body, headers=signed(validator, "/echo", body, miner.ss58)
        )
        assert resp.status_code == 422, body
        assert expect in resp.json()["reason"], resp.json()


async def test_unknown_route_and_wrong_method(net):
    _, _, endpoint, _ = net
    resp = httpx.post(f"http://{endpoint}/nope", content=b"{}")
    assert resp.status_code == 404 and resp.json()["code"] == "not_found"
    resp = httpx.get(f"http://{endpoint}/echo")
    assert resp.status_code == 405


async def test_handler_refusal_and_crash_reach_client_as_typed_rejections(net, caplog):
    miner, validator, endpoint, _ = net
    async with MinerClient(validator) as client:
        with pytest.raises(Rejected) as refused:
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="refuse"), EchoResponse)
        with pytest.raises(Rejected) as crashed:
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="crash"), EchoResponse)
    assert (refused.value.status, refused.value.code, refused.value.reason) == (
        409,
        "no_capacity",
        "no GPU free right now",
    )
    assert (crashed.value.status, crashed.value.code) == (500, "internal")
    assert "secret" not in crashed.value.reason
    assert "secret internal detail" in caplog.text  # logged with traceback, not leaked


async def test_rate_limit_returns_429_with_retry_after(keys, start):
    miner, validator = keys("miner"), keys("validator")
    endpoint = start(build_server(miner, None, ServerLimits(rate_per_s=0.5, burst=2)))
    async with MinerClient(validator) as client:
        for _ in range(2):
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)
        with pytest.raises(Rejected) as exc:
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)
    assert exc.value.status == 429 and exc.value.code == "rate_limited"
    assert exc.value.retry_after == 2.0


async def test_client_expecting_another_hotkey_gets_bad_response_signature(net, keys):
    miner, validator, endpoint, _ = net
    impostor_expected = keys("expected-miner")
    async with MinerClient(validator) as client:
        with pytest.raises(BadResponseSignature) as exc:
            await client.request(
                endpoint, impostor_expected.ss58, "/echo", EchoRequest(text="x"), EchoResponse
            )
    assert exc.value.status == 421
    assert miner.ss58 in str(exc.value)


class _TamperingProxy(httpx.AsyncBaseTransport):
    """A man in the middle that rewrites the miner's answer."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self._inner.handle_async_request(request)
        body = (await resp.aread()).replace(b'"x"', b'"y"')
        headers = [(k, v) for k, v in resp.headers.items() if k.lower() != "content-length"]
        return httpx.Response(resp.status_code, headers=headers, content=body)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_body_altered_in_transit_is_detected(net):
    miner, validator, endpoint, _ = net
    async with MinerClient(validator, transport=_TamperingProxy()) as client:
        with pytest.raises(BadResponseSignature, match="does not verify"):
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)


async def test_unsigned_success_from_a_plain_server_is_not_trusted(keys, start):
    miner, validator = keys("miner"), keys("validator")
    plain = build_server(miner, None)
    plain.insecure_disable_auth = True  # a server that answers without signing
    endpoint = start(plain)
    async with MinerClient(validator) as client:
        with pytest.raises(BadResponseSignature, match="not signed"):
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)


async def test_response_not_matching_model_is_invalid(net):
    miner, validator, endpoint, _ = net
    async with MinerClient(validator) as client:
        with pytest.raises(InvalidResponse, match="HealthResponse"):
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), HealthResponse)


async def test_unreachable_and_slow_peers_raise_typed_errors(keys, start):
    import asyncio

    miner, validator = keys("miner"), keys("validator")
    server = build_server(miner, None)

    @server.route("/slow", EchoRequest, EchoResponse)
    async def slow(req, caller):
        await asyncio.sleep(1.0)
        return EchoResponse(text="late", caller="")

    endpoint = start(server)
    async with MinerClient(validator) as client:
        with pytest.raises(RequestTimeout):
            await client.request(
                endpoint, miner.ss58, "/slow", EchoRequest(text="x"), EchoResponse, timeout=0.3
            )
        with pytest.raises(PeerUnreachable):
            await client.request("127.0.0.1:1", miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)


async def test_serve_runs_on_the_callers_loop_until_stop_event(keys):
    import asyncio
    import socket

    from compute.transport import serve

    miner, validator = keys("miner"), keys("validator")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    stop = asyncio.Event()
    task = asyncio.create_task(serve(build_server(miner, None).app, "127.0.0.1", port, stop))
    async with MinerClient(validator) as client:
        for _ in range(100):
            try:
                resp = await client.request(
                    f"127.0.0.1:{port}", miner.ss58, "/echo", EchoRequest(text="up"), EchoResponse
                )
                break
            except PeerUnreachable:
                await asyncio.sleep(0.05)
    assert resp.text == "up"
    stop.set()
    await asyncio.wait_for(task, 10)
