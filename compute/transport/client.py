"""Validator/operator side of the signed transport: ``MinerClient`` over ``httpx.AsyncClient``.

What it does: serialises a pydantic request once, signs exactly those bytes with
``bittensor.http_auth.sign`` (bound to the miner hotkey it means to reach), sends them over a
pooled connection under a global concurrency bound and a total per-call timeout, checks the
miner's response signature (``compute-resp/1``) against that same hotkey, and returns the typed
response or raises one typed :class:`TransportError`.

What it deliberately does not do: retry (each retry needs a fresh nonce and the caller knows
whether an action is idempotent), discover endpoints (``compute.chain`` does), or trust any
response, error or success, that is not signed by the hotkey it addressed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from bittensor import http_auth
from pydantic import BaseModel, ValidationError

from compute.peertext import printable
from compute.protocol import ErrorResponse, route_for

from .auth import HEADER_RESPONSE_HOTKEY, HEADER_RESPONSE_SIGNATURE, KeyWallet, verify_response

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

# Idle connections are dropped before the server's keep-alive timeout (15 s in server.py), so the
# client never reuses a connection the server is closing at that very moment.
KEEPALIVE_S = 4.0


class TransportError(Exception):
    """Root of every failure a MinerClient call can raise."""


class RequestTimeout(TransportError):
    """The miner did not answer within the call's timeout."""


class PeerUnreachable(TransportError):
    """Connection refused, reset, DNS failure or a broken HTTP exchange."""


class BadResponseSignature(TransportError):
    """The response is unsigned, or not signed by the hotkey the request was addressed to."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Rejected(TransportError):
    """The miner refused the request (signed 4xx/5xx with an ErrorResponse body)."""

    def __init__(self, status: int, code: str, reason: str, retry_after: float | None = None) -> None:
        code, reason = printable(code, 64), printable(reason, 2000)  # a peer's words, shown to people
        super().__init__(f"{status} {code}: {reason}")
        self.status = status
        self.code = code
        self.reason = reason
        self.retry_after = retry_after


class InvalidResponse(TransportError):
    """A signed response whose body does not match the expected model (or is too large)."""


@dataclass(frozen=True)
class SignedExchange:
    """One answered call as both sides signed it: the request (path, body, btauth/1 headers) and
    the miner's signed response (body, ``compute-resp/1`` signature). Kept by a caller that must
    later show a third party what the miner answered (a renter's rental: docs/collateral.md)."""

    path: str
    body: bytes
    headers: dict[str, str]
    response: bytes
    signature: str


@dataclass
class _Peer:
    http: httpx.AsyncClient
    slots: asyncio.Semaphore


def _base_url(endpoint: str) -> str:
    endpoint = endpoint.strip().rstrip("/")
    if endpoint.startswith(("http://", "https://")):
        return endpoint
    return f"http://{endpoint}"


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class MinerClient:
    """Signed calls to miners. Use as ``async with MinerClient(wallet) as client:``."""

    def __init__(
        self,
        wallet: Any,
        timeout: float = 30.0,
        max_concurrency: int = 64,
        *,
        per_peer_concurrency: int = 4,
        max_response_bytes: int = 16 << 20,
        transport: httpx.AsyncBaseTransport | None = None,
        insecure_no_auth: bool = False,
    ) -> None:
        self.wallet = KeyWallet.from_wallet(wallet)
        self.hotkey = self.wallet.ss58
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.insecure_no_auth = insecure_no_auth
        self.per_peer_concurrency = max(1, min(per_peer_concurrency, max_concurrency))
        self._sem = asyncio.Semaphore(max_concurrency)
        self._transport = transport
        self._ssl = ssl.create_default_context()  # built once: each AsyncClient would load CA files again
        self._peers: dict[str, _Peer] = {}

    async def __aenter__(self) -> MinerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        peers, self._peers = list(self._peers.values()), {}
        for peer in peers:
            await peer.http.aclose()

    def _peer(self, base_url: str) -> _Peer:
        """One small connection pool per miner: httpx's pool slows down sharply as it grows."""
        peer = self._peers.get(base_url)
        if peer is None:
            n = self.per_peer_concurrency
            http = httpx.AsyncClient(
                limits=httpx.Limits(
                    max_connections=n, max_keepalive_connections=n, keepalive_expiry=KEEPALIVE_S
                ),
                timeout=self.timeout,
                transport=self._transport,
                trust_env=False,
                verify=self._ssl,
            )
            peer = self._peers[base_url] = _Peer(http, asyncio.Semaphore(n))
        return peer

    async def call(
        self,
        endpoint: str,
        hotkey: str,
        request: BaseModel,
        *,
        timeout: float | None = None,
        record: list[SignedExchange] | None = None,
    ) -> Any:
        """Send a ``compute.protocol`` request; path and response model come from ``route_for``.

        With ``record``, a successful signed exchange is appended to it."""
        path, response_model = route_for(request)  # type: ignore[arg-type]
        if record is None:  # subclasses that hook ``request`` need not know the keyword
            return await self.request(endpoint, hotkey, path, request, response_model, timeout=timeout)
        return await self.request(
            endpoint, hotkey, path, request, response_model, timeout=timeout, record=record
        )

    async def request(
        self,
        endpoint: str,
        hotkey: str,
        path: str,
        body: BaseModel,
        response_model: type[M],
        *,
        timeout: float | None = None,
        record: list[SignedExchange] | None = None,
    ) -> M:
        """POST ``body`` to ``endpoint`` + ``path`` signed for ``hotkey``; parse as ``response_model``."""
        raw = body.model_dump_json().encode()
        limit = self.timeout if timeout is None else timeout
        where = f"{endpoint}{path} (hotkey {hotkey})"
        base = _base_url(endpoint)
        peer = self._peer(base)
        async with self._sem, peer.slots:
            headers = {"Content-Type": "application/json"}
            if not self.insecure_no_auth:
                headers.update(
                    http_auth.sign(self.wallet, method="POST", path=path, body=raw, receiver_ss58=hotkey)
                )
            try:
                status, resp_headers, content = await asyncio.wait_for(
                    self._send(peer.http, base + path, raw, headers, limit), limit
                )
            except (asyncio.TimeoutError, httpx.TimeoutException):
                raise RequestTimeout(f"{where}: no answer within {limit:g}s") from None
            except (httpx.TransportError, OSError) as exc:
                raise PeerUnreachable(f"{where}: {type(exc).__name__}: {printable(exc, 300)}") from None
            except httpx.InvalidURL as exc:
                raise PeerUnreachable(f"{where}: invalid endpoint: {printable(exc, 300)}") from None
        if not self.insecure_no_auth:
            self._check_signature(
                where, hotkey, int(headers[http_auth.HEADER_NONCE]), status, resp_headers, content
            )
        if 200 <= status < 300:
            try:
                parsed = response_model.model_validate_json(content)
            except ValidationError as exc:
                raise InvalidResponse(
                    f"{where}: response is not a valid {response_model.__name__}: "
                    f"{exc.error_count()} error(s), first: {printable(exc.errors()[0]['msg'], 300)}"
                ) from None
            if record is not None and not self.insecure_no_auth:
                signed = {k: v for k, v in headers.items() if k.lower().startswith("x-bittensor")}
                signature = resp_headers.get(HEADER_RESPONSE_SIGNATURE, "")
                record.append(SignedExchange(path, raw, signed, content, signature))
            return parsed
        try:
            error = ErrorResponse.model_validate_json(content)
            code, reason = error.code, error.reason
        except ValidationError:
            code, reason = "unknown", content[:200].decode(errors="replace")
        raise Rejected(status, code, reason, _retry_after(resp_headers.get("retry-after")))

    async def _send(
        self, http: httpx.AsyncClient, url: str, raw: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, httpx.Headers, bytes]:
        async with http.stream("POST", url, content=raw, headers=headers, timeout=timeout) as resp:
            declared = resp.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_response_bytes:
                raise InvalidResponse(
                    f"{url}: response of {declared} bytes exceeds {self.max_response_bytes}"
                )
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise InvalidResponse(f"{url}: response exceeds {self.max_response_bytes} bytes")
                chunks.append(chunk)
            return resp.status_code, resp.headers, b"".join(chunks)

    @staticmethod
    def _check_signature(
        where: str, hotkey: str, nonce: int, status: int, headers: httpx.Headers, content: bytes
    ) -> None:
        signature = headers.get(HEADER_RESPONSE_SIGNATURE)
        signer = headers.get(HEADER_RESPONSE_HOTKEY)
        if signature is None:
            raise BadResponseSignature(f"{where}: HTTP {status} response is not signed", status)
        if signer is not None and signer != hotkey:
            raise BadResponseSignature(
                f"{where}: HTTP {status} response signed by {signer}, expected {hotkey}", status
            )
        if not verify_response(hotkey, nonce, content, signature):
            raise BadResponseSignature(f"{where}: HTTP {status} response signature does not verify", status)
