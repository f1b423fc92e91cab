"""JSON-RPC to the EVM with bounds no endpoint can stretch: the one transport of every web3 client here.

web3's own ``HTTPProvider`` (over requests) bounds each socket read, not a call: an endpoint that
accepts and never answers, or drips a valid-looking answer one byte a second, held
``python -m compute collateral status`` past 150 s (per-read timeouts, and web3's retries), and an
answer of 512 MiB was read whole into memory. :class:`BoundedProvider` is a web3 provider over
httpcore whose every call has

- **one deadline for the whole call** (``RpcLimits.deadline_s``, retries and backoff included):
  every connect, TLS handshake, write and read is given only the time left, so a drip cannot
  stretch it (each read would otherwise get a fresh timeout);
- **a connect bound** (``connect_s``) within it, so a black-holed address leaves time to retry;
- **a size cap** (``max_bytes``) on the answer, streamed: a declared length past it is refused
  before its body is read, an undeclared one once the cap is crossed; the header section is h11's
  (100 KiB);
- **bounded retries with backoff**: a refused or reset connection, an answer cut short, or a 429/5xx
  gateway status is retried (at most ``retries`` times, ``backoff_s`` doubling, within the
  deadline); a transaction (``eth_sendRawTransaction``) only when it was never sent. An answer
  that is not JSON-RPC or too large is not retried: the endpoint chose it;
- **the chain id asked once** (web3 asks it around every call): a slow endpoint costs one round trip
  a read, not three;
- **one clear line** on failure: :class:`RpcUnavailable` (a ``ChainUnavailable``) naming the endpoint
  (scheme, host and port: never a path or credentials, where hosted RPCs keep their API keys), the
  method and what went wrong.

What it deliberately does not do: bound DNS resolution (the system resolver's), follow redirects,
use proxies from the environment, or batch requests. Sync by design, like web3's HTTP provider:
async callers run it in a thread, and the deadline frees the thread.
"""

from __future__ import annotations

import itertools
import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
from web3 import Web3
from web3._utils.encoding import FriendlyJsonSerde, Web3JsonEncoder
from web3.providers.base import JSONBaseProvider
from web3.types import RPCEndpoint, RPCResponse

from compute.collateral.errors import ChainUnavailable, CollateralError
from compute.peertext import printable
from compute.safejson import PARSE_ERRORS, loads

logger = logging.getLogger(__name__)

DEADLINE_S = 10.0  # a whole JSON-RPC call, retries included
CONNECT_S = 5.0  # one connection attempt, within the deadline
MAX_BYTES = 4 * 1024 * 1024  # an answer (eth_call, a block header, a receipt: a few KiB honest)
RETRIES = 2  # at most this many more tries of a call that failed fast
BACKOFF_S = 0.25  # before the first retry; doubles
RETRY_STATUS = frozenset({429, 502, 503, 504})
WRITES = frozenset({"eth_sendRawTransaction", "eth_sendTransaction"})  # never sent twice
CONSTANT = frozenset({"eth_chainId", "net_version"})  # asked once: web3 asks the chain id twice a call
_DEADLINE: ContextVar[float | None] = ContextVar("collateral_rpc_deadline", default=None)


@dataclass(frozen=True)
class RpcLimits:
    deadline_s: float = DEADLINE_S
    connect_s: float = CONNECT_S
    max_bytes: int = MAX_BYTES
    retries: int = RETRIES
    backoff_s: float = BACKOFF_S

    def __post_init__(self) -> None:
        if not (self.deadline_s > 0 and self.connect_s > 0 and self.max_bytes > 0 and self.retries >= 0):
            raise CollateralError(f"RPC limits must be positive: {self}")


class RpcUnavailable(ChainUnavailable):
    """The endpoint gave no usable answer in time; ``endpoint`` is its scheme://host:port."""

    def __init__(self, endpoint: str, reason: str) -> None:
        self.endpoint, self.reason = endpoint, reason
        super().__init__(f"EVM RPC {endpoint}: {reason}")


class _Retry(Exception):
    """A failure worth another try (the endpoint may answer next time)."""


class _Fail(Exception):
    """A failure not worth another try."""


def endpoint_name(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: what errors and logs name (never a path, query or user)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "<malformed URL>"
    if not host:
        return "<malformed URL>"
    shown = f"[{host}]" if ":" in host else host
    return printable(f"{parts.scheme}://{shown}{f':{port}' if port else ''}", 300)


def _left(error: type[Exception]) -> float | None:
    """Seconds left of the current call's deadline (None: no deadline); ``error`` when none are."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the call's deadline passed")
    return left


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    left = _left(error)
    if left is None:
        return timeout
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every operation gets at most the time left of the call."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        # the handshake runs under one socket timeout as a whole (CPython's ssl keeps a deadline)
        inner = self._inner.start_tls(ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, _clamp(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        raise httpcore.UnsupportedProtocol("the EVM RPC is http(s) only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class BoundedProvider(JSONBaseProvider):
    """web3 provider: JSON-RPC over HTTP(S) to ``url`` within ``limits`` (see the module's docstring)."""

    def __init__(self, url: str, limits: RpcLimits | None = None) -> None:
        super().__init__()
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise CollateralError(f"--collateral.rpc {printable(url, 200)!r} is not an http(s) URL")
        self.url = url
        self.endpoint = endpoint_name(url)
        self.limits = limits or RpcLimits()
        self._ids = itertools.count(1)
        self._constant: dict[str, Any] = {}  # CONSTANT method -> its result, once answered
        self._pool = httpcore.ConnectionPool(
            max_connections=16, keepalive_expiry=30.0, network_backend=_DeadlineBackend()
        )

    def __str__(self) -> str:
        return f"RPC connection {self.endpoint}"

    def close(self) -> None:
        self._pool.close()

    def __del__(self) -> None:  # kept-alive sockets closed, not left to the collector's warning
        try:
            self._pool.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing to do
            pass

    def is_connected(self, show_traceback: bool = False) -> bool:
        try:
            return "result" in self.make_request(RPCEndpoint("web3_clientVersion"), [])
        except ChainUnavailable:
            if show_traceback:
                raise
            return False

    def make_request(self, method: RPCEndpoint, params: Any) -> RPCResponse:
        request_id = next(self._ids)
        if method in self._constant:
            return {"jsonrpc": "2.0", "id": request_id, "result": self._constant[method]}
        body = FriendlyJsonSerde().json_encode(
            {"jsonrpc": "2.0", "method": method, "params": params or [], "id": request_id}, Web3JsonEncoder
        )
        limits = self.limits
        start = time.monotonic()
        deadline = start + limits.deadline_s
        tries = 0
        while True:
            tries += 1
            try:
                answer = self._once(method, body.encode(), request_id, deadline)
                if method in CONSTANT and "result" in answer:
                    self._constant[method] = answer["result"]
                return answer
            except _Fail as error:
                raise self._unavailable(str(error), tries, start) from None
            except _Retry as error:
                pause = limits.backoff_s * 2 ** (tries - 1)
                if tries > limits.retries or time.monotonic() + pause >= deadline:
                    raise self._unavailable(str(error), tries, start) from None
                logger.debug("EVM RPC %s %s: %s; retrying in %.2f s", self.endpoint, method, error, pause)
                time.sleep(pause)

    def _unavailable(self, reason: str, tries: int, start: float) -> RpcUnavailable:
        took = time.monotonic() - start
        return RpcUnavailable(
            self.endpoint, f"{reason} ({tries} {'try' if tries == 1 else 'tries'}, {took:.1f} s)"
        )

    def _once(self, method: str, body: bytes, request_id: int, deadline: float) -> RPCResponse:
        limits, resend = self.limits, method not in WRITES
        token = _DEADLINE.set(deadline)
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Fail(f"no complete answer to {method} within {limits.deadline_s:g} s")
            timeouts = {"connect": min(limits.connect_s, left), "read": left, "write": left, "pool": left}
            headers = [(b"Content-Type", b"application/json"), (b"Accept", b"application/json")]
            with self._pool.stream(
                "POST", self.url, headers=headers, content=body, extensions={"timeout": timeouts}
            ) as response:
                status = response.status
                if status in RETRY_STATUS:
                    raise (_Retry if resend else _Fail)(f"answered HTTP {status} to {method}")
                raw = self._read_capped(response, method)
        except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
            if time.monotonic() >= deadline:
                raise _Fail(f"no connection within {limits.deadline_s:g} s") from None
            raise _Retry(f"cannot connect ({printable(error, 120) or type(error).__name__})") from None
        except httpcore.TimeoutException:
            raise _Fail(f"no complete answer to {method} within {limits.deadline_s:g} s") from None
        except (httpcore.NetworkError, httpcore.ProtocolError) as error:
            # cut short, reset, or not HTTP at all: h11 cannot tell a broken answer from garbage
            reason = f"no valid HTTP answer to {method} ({printable(error, 120) or type(error).__name__})"
            raise (_Retry if resend else _Fail)(reason) from None
        finally:
            _DEADLINE.reset(token)
        return self._parse(raw, status, method, request_id)

    def _read_capped(self, response: httpcore.Response, method: str) -> bytes:
        cap = self.limits.max_bytes
        declared = _content_length(response.headers)
        if declared is not None and declared > cap:
            raise _Fail(f"answer to {method} of {declared} bytes is over the {_size(cap)} cap")
        chunks, size = [], 0
        for chunk in response.iter_stream():
            size += len(chunk)
            if size > cap:
                raise _Fail(f"answer to {method} is over the {_size(cap)} cap")
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse(self, raw: bytes, status: int, method: str, request_id: int) -> RPCResponse:
        try:
            answer = loads(raw)
        except PARSE_ERRORS:
            answer = None
        if (
            not isinstance(answer, dict)
            or answer.get("id") != request_id
            or ("result" in answer) == ("error" in answer)
        ):
            what = f"HTTP {status}" if status != 200 else "something"
            raise _Fail(f"answered {what} that is not a JSON-RPC answer to {method}")
        return answer  # type: ignore[return-value]


def _content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _size(count: int) -> str:
    return f"{count / 1024 / 1024:g} MiB" if count >= 1024 * 1024 else f"{count} bytes"


def bounded_web3(url: str, limits: RpcLimits | None = None) -> Web3:
    """A ``Web3`` over :class:`BoundedProvider`: what every web3 client of the collateral contract uses."""
    return Web3(BoundedProvider(url, limits))


__all__ = [
    "BACKOFF_S",
    "CONNECT_S",
    "DEADLINE_S",
    "MAX_BYTES",
    "RETRIES",
    "BoundedProvider",
    "RpcLimits",
    "RpcUnavailable",
    "bounded_web3",
    "endpoint_name",
]
