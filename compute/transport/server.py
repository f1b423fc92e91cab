"""The miner's signed HTTP server: FastAPI routes behind btauth/1, access policy and admission.

Before HTTP: the app's ``ConnectionGuard`` (see ``guard.py``) caps open connections in total and
per address and closes a connection whose request headers do not arrive within
``header_timeout_s``. Every request to a registered route then goes through, in order (first
failure wins):

0. at most ``max_preauth_per_ip`` unauthenticated requests in flight per address -> 429
1. body read with a hard cap (Content-Length checked first, then the stream) and a deadline
   (``body_timeout_s`` for the whole body) -> 413 / 408; a client that disconnects is noted
   in the refusal summary, never logged with a traceback
2. ``bittensor.http_auth.verify`` on the raw bytes -> 401 (unsigned, malformed, bad signature,
   stale, replayed) or 421 (signed for another receiving hotkey)
3. :class:`AccessPolicy` on the authenticated hotkey -> 403 (503 while no metagraph is loaded)
4. per-caller token bucket -> 429 with ``Retry-After``
5. a concurrency slot, higher stake first when saturated -> 503 after ``queue_timeout_s``
6. body parsed into the route's request model -> 422 with pydantic's messages summarised
7. the handler: ``RequestFailed`` -> its status; anything else -> 500 (logged with traceback)

Unknown paths get 404 and wrong methods 405. Every response to a request that carried a nonce
header is signed (``X-Response-Signature``, ``X-Response-Hotkey``; see ``auth.sign_response``).

What it deliberately does not do: share replay state between processes. The nonce store is one
thread-safe ``InMemoryNonceStore`` per server object; run a single worker per hotkey, or pass a
shared ``NonceStore`` (e.g. Redis SET NX EX) when running several.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bittensor import http_auth
from fastapi import FastAPI
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from compute.protocol import ErrorCode, ErrorResponse, RequestFailed

from .auth import HEADER_RESPONSE_HOTKEY, HEADER_RESPONSE_SIGNATURE, KeyWallet, sign_response
from .guard import ConnectionGuard, GuardLimits, fit_to_nofile, open_file_limit
from .policy import AccessPolicy, Forbidden, PolicyUnavailable
from .ratelimit import Busy, PrioritySemaphore, RateLimiter, retry_after_header
from .running import RunningServer, serve, serve_in_thread

logger = logging.getLogger(__name__)

Handler = Callable[[Any, http_auth.Caller], Awaitable[BaseModel]]

_AUTH_STATUS: dict[type[http_auth.AuthError], tuple[int, str]] = {
    http_auth.MalformedAuth: (401, "malformed auth headers"),
    http_auth.BadSignature: (401, "bad signature"),
    http_auth.StaleRequest: (401, "stale request"),
    http_auth.ReplayedRequest: (401, "replayed request"),
    http_auth.WrongReceiver: (421, "wrong receiver"),
}


@dataclass(frozen=True)
class RawSigned:
    """The request a handler is serving, as signed: path, raw body and the btauth/1 headers."""

    path: str
    body: bytes
    headers: dict[str, str]


# Set around each handler call so a handler that must keep proof of who asked (a rental receipt)
# can read the signed bytes; None outside a handler or with authentication disabled.
current_signed: contextvars.ContextVar[RawSigned | None] = contextvars.ContextVar(
    "current_signed", default=None
)
_AUTH_HEADERS = tuple(
    h.lower()
    for h in (
        http_auth.HEADER_VERSION,
        http_auth.HEADER_HOTKEY,
        http_auth.HEADER_RECEIVER,
        http_auth.HEADER_NONCE,
        http_auth.HEADER_CRYPTO,
        http_auth.HEADER_SIGNATURE,
    )
)


@dataclass(frozen=True)
class ServerLimits:
    """Hard limits of one server; defaults suit a miner behind the public internet."""

    max_body_bytes: int = 1 << 20
    max_concurrency: int = 64
    max_waiting: int = 1024
    queue_timeout_s: float = 5.0
    rate_per_s: float = 10.0
    burst: float = 20.0
    handler_timeout_s: float = 300.0
    max_age_s: float = http_auth.DEFAULT_MAX_AGE
    allowed_skew_s: float = http_auth.DEFAULT_ALLOWED_SKEW
    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    max_connections: int = 2048
    max_connections_per_ip: int = 128
    max_preauth_per_ip: int = 64
    backlog: int = 2048
    connect_rate_per_ip: float = 10.0
    connect_burst_per_ip: float = 50.0
    known_reserve: int = 256  # connections kept for addresses of admitted callers (see guard)
    max_preauth_strangers: int = 256  # unauthenticated requests in flight from all unknown addresses


@dataclass(frozen=True)
class _Route:
    path: str
    request_model: type[BaseModel]
    response_model: type[BaseModel]
    handler: Handler


class _Refusal(Exception):
    def __init__(self, status: int, code: str, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status, self.code, self.reason, self.headers = status, code, reason, headers or {}


def _claimed_nonce(request: Request) -> int | None:
    raw = request.headers.get(http_auth.HEADER_NONCE)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def summarise_validation(exc: ValidationError, limit: int = 8) -> str:
    """One line per problem, ``field.path: message``, at most ``limit`` problems."""
    errors = exc.errors(include_url=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in errors[:limit]]
    more = f" (+{len(errors) - limit} more)" if len(errors) > limit else ""
    return "; ".join(parts) + more


class SignedServer:
    """FastAPI app serving hotkey-signed routes for one miner hotkey (``server.app``)."""

    def __init__(
        self,
        keypair: Any,
        policy: AccessPolicy | None,
        limits: ServerLimits | None = None,
        *,
        nonce_store: http_auth.NonceStore | None = None,
        insecure_disable_auth: bool = False,
    ) -> None:
        self.keypair = KeyWallet.from_wallet(keypair).keypair
        self.hotkey = self.keypair.ss58_address
        self.policy = policy
        self.limits = limits or ServerLimits()
        window = self.limits.max_age_s + self.limits.allowed_skew_s
        self.nonce_store = nonce_store or http_auth.InMemoryNonceStore(retention=max(60.0, window + 1.0))
        self.rate_limiter = RateLimiter(self.limits.rate_per_s, self.limits.burst)
        self.slots = PrioritySemaphore(self.limits.max_concurrency, self.limits.max_waiting)
        self.insecure_disable_auth = insecure_disable_auth
        lim = self.limits
        guard_limits = GuardLimits(
            lim.max_connections,
            lim.max_connections_per_ip,
            lim.header_timeout_s,
            lim.backlog,
            lim.connect_rate_per_ip,
            lim.connect_burst_per_ip,
            known_reserve=lim.known_reserve,
        )
        self.guard = ConnectionGuard(fit_to_nofile(guard_limits, open_file_limit()))
        self._preauth: Counter[str] = Counter()
        self._strangers = 0  # unauthenticated requests in flight from unknown addresses
        if insecure_disable_auth:
            logger.warning("SignedServer hotkey=%s runs WITHOUT authentication (benchmark only)", self.hotkey)
        self._routes: dict[str, _Route] = {}
        self.app = FastAPI(lifespan=self._lifespan, docs_url=None, redoc_url=None, openapi_url=None)
        self.app.add_exception_handler(StarletteHTTPException, self._http_exception)
        self.app.state.connection_guard = self.guard  # picked up by serve() / serve_in_thread()

    # ------------------------------------------------------------------ routes
    def route(
        self, path: str, request_model: type[BaseModel], response_model: type[BaseModel]
    ) -> Callable[[Handler], Handler]:
        """Decorator: ``@server.route("/v1/x", XRequest, XResponse)`` on ``async def h(req, caller)``."""

        def register(handler: Handler) -> Handler:
            self.add_route(path, request_model, response_model, handler)
            return handler

        return register

    def add_route(
        self, path: str, request_model: type[BaseModel], response_model: type[BaseModel], handler: Handler
    ) -> None:
        if path in self._routes:
            raise ValueError(f"route {path} is already registered")
        route = _Route(path, request_model, response_model, handler)
        self._routes[path] = route

        async def endpoint(request: Request) -> Response:
            return await self._handle(request, route)

        self.app.add_route(path, endpoint, methods=["POST"], include_in_schema=False)

    # ------------------------------------------------------------------ pipeline
    async def _handle(self, request: Request, route: _Route) -> Response:
        nonce = _claimed_nonce(request)
        address = request.client.host if request.client else "?"
        try:
            with self._unauthenticated(address):
                body = await self._read_body(request)
                caller = self._authenticate(request, body)
            priority = self._admit(caller.hotkey_ss58)
            self.guard.trust(address)  # an admitted caller's address keeps the reserved slots open
            try:
                signed = RawSigned(
                    route.path, body, {k: v for k, v in request.headers.items() if k.lower() in _AUTH_HEADERS}
                )
                token = current_signed.set(None if self.insecure_disable_auth else signed)
                try:
                    async with self.slots.slot(priority, self.limits.queue_timeout_s):
                        payload = await self._run(route, body, caller)
                finally:
                    current_signed.reset(token)
            except Busy as exc:
                raise _Refusal(
                    503, ErrorCode.BUSY, f"miner is saturated: {exc}", {"Retry-After": "1"}
                ) from None
            return self._respond(200, payload, nonce)
        except _Refusal as refusal:
            return self._error(refusal.status, refusal.code, refusal.reason, nonce, refusal.headers)
        except ClientDisconnect:
            self.guard.refusals.note("requests (client disconnected)", address)
            return Response(status_code=499)  # nobody is left to read it
        except Exception:
            logger.exception("request pipeline failed path=%s", route.path)
            return self._error(500, ErrorCode.INTERNAL, "internal error while handling the request", nonce)

    @contextlib.contextmanager
    def _unauthenticated(self, address: str) -> Iterator[None]:
        """A per-address slot for a request until it is authenticated (refused over the cap)."""
        if self._preauth[address] >= self.limits.max_preauth_per_ip:
            self.guard.refusals.note("requests (unauthenticated per-address cap)", address)
            raise _Refusal(
                429,
                ErrorCode.RATE_LIMITED,
                f"more than {self.limits.max_preauth_per_ip} unauthenticated requests in flight from {address}",
                {"Retry-After": "1", "Connection": "close"},
            )
        stranger = not self.guard.is_known(address)
        if stranger and self._strangers >= self.limits.max_preauth_strangers:
            # every slow body costs the event loop work per byte: unknown addresses share a bounded
            # number of them, so that a flood from many addresses cannot slow the validators' answers
            self.guard.refusals.note("requests (unauthenticated, all unknown addresses)", address)
            raise _Refusal(
                429,
                ErrorCode.RATE_LIMITED,
                "too many unauthenticated requests in flight; retry shortly",
                {"Retry-After": "1", "Connection": "close"},
            )
        self._preauth[address] += 1
        self._strangers += stranger
        self.guard.strangers_full = self._strangers >= self.limits.max_preauth_strangers
        try:
            yield
        finally:
            self._strangers -= stranger
            self.guard.strangers_full = self._strangers >= self.limits.max_preauth_strangers
            self._preauth[address] -= 1
            if self._preauth[address] <= 0:
                del self._preauth[address]

    async def _read_body(self, request: Request) -> bytes:
        try:
            return await asyncio.wait_for(self._read_capped(request), self.limits.body_timeout_s)
        except asyncio.TimeoutError:
            address = request.client.host if request.client else "?"
            self.guard.refusals.note("requests (body deadline)", address)
            raise _Refusal(
                408,
                ErrorCode.INVALID_REQUEST,
                f"request body did not arrive within {self.limits.body_timeout_s:g}s",
                {"Connection": "close"},
            ) from None

    async def _read_capped(self, request: Request) -> bytes:
        cap = self.limits.max_body_bytes
        too_large = _Refusal(
            413, ErrorCode.TOO_LARGE, f"request body exceeds {cap} bytes", {"Connection": "close"}
        )
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                if int(declared) > cap:
                    raise too_large
            except ValueError:
                raise _Refusal(400, ErrorCode.INVALID_REQUEST, "Content-Length is not an integer") from None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > cap:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    def _authenticate(self, request: Request, body: bytes) -> http_auth.Caller:
        headers = request.headers
        if self.insecure_disable_auth:
            return http_auth.Caller(headers.get(http_auth.HEADER_HOTKEY, "anonymous"), 0, 1)
        if http_auth.HEADER_SIGNATURE not in headers and http_auth.HEADER_HOTKEY not in headers:
            raise _Refusal(401, ErrorCode.UNAUTHORIZED, "unsigned request: btauth/1 headers are missing")
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            return http_auth.verify(
                headers,
                body,
                method=request.method,
                path=path,
                self_hotkey_ss58=self.hotkey,
                max_age=self.limits.max_age_s,
                allowed_skew=self.limits.allowed_skew_s,
                nonce_store=self.nonce_store,
            )
        except http_auth.AuthError as exc:
            status, label = next(
                (v for k, v in _AUTH_STATUS.items() if isinstance(exc, k)), (401, "authentication failed")
            )
            logger.info(
                "auth refused path=%s hotkey=%s reason=%s: %s",
                request.url.path,
                headers.get(http_auth.HEADER_HOTKEY),
                label,
                exc,
            )
            raise _Refusal(status, ErrorCode.UNAUTHORIZED, f"{label}: {exc}") from None

    def _admit(self, hotkey: str) -> float:
        """Policy then rate limit; returns the caller's admission priority."""
        if self.policy is not None and not self.insecure_disable_auth:
            try:
                self.policy.check(hotkey)
            except Forbidden as exc:
                logger.info("forbidden hotkey=%s reason=%s", hotkey, exc.reason)
                raise _Refusal(403, ErrorCode.FORBIDDEN, exc.reason) from None
            except PolicyUnavailable as exc:
                raise _Refusal(503, ErrorCode.BUSY, str(exc), {"Retry-After": "5"}) from None
        wait = self.rate_limiter.take(hotkey)
        if wait > 0:
            raise _Refusal(
                429,
                ErrorCode.RATE_LIMITED,
                f"more than {self.limits.rate_per_s:g} requests/s (burst {self.limits.burst:g}) from this hotkey",
                {"Retry-After": retry_after_header(wait)},
            )
        return self.policy.priority(hotkey) if self.policy is not None else 0.0

    async def _run(self, route: _Route, body: bytes, caller: http_auth.Caller) -> bytes:
        try:
            parsed = route.request_model.model_validate_json(body)
        except ValidationError as exc:
            raise _Refusal(422, ErrorCode.INVALID_REQUEST, summarise_validation(exc)) from None
        try:
            result = await asyncio.wait_for(route.handler(parsed, caller), self.limits.handler_timeout_s)
        except RequestFailed as exc:
            raise _Refusal(exc.status, exc.code, exc.reason) from None
        except asyncio.TimeoutError:
            logger.error("handler timed out path=%s hotkey=%s", route.path, caller.hotkey_ss58)
            raise _Refusal(504, ErrorCode.INTERNAL, "the miner did not finish this request in time") from None
        except Exception:
            logger.exception("handler failed path=%s hotkey=%s", route.path, caller.hotkey_ss58)
            raise _Refusal(500, ErrorCode.INTERNAL, "internal error while handling the request") from None
        if not isinstance(result, route.response_model):
            logger.error(
                "handler for %s returned %s, not %s",
                route.path,
                type(result).__name__,
                route.response_model.__name__,
            )
            raise _Refusal(500, ErrorCode.INTERNAL, "internal error while handling the request")
        return result.model_dump_json().encode()

    # ------------------------------------------------------------------ responses
    def _respond(
        self, status: int, body: bytes, nonce: int | None, headers: dict[str, str] | None = None
    ) -> Response:
        out = dict(headers or {})
        if nonce is not None and not self.insecure_disable_auth:
            out[HEADER_RESPONSE_HOTKEY] = self.hotkey
            out[HEADER_RESPONSE_SIGNATURE] = sign_response(self.keypair, nonce, body)
        return Response(body, status_code=status, headers=out, media_type="application/json")

    def _error(
        self, status: int, code: str, reason: str, nonce: int | None, headers: dict[str, str] | None = None
    ) -> Response:
        body = ErrorResponse(code=code, reason=reason[:2000]).model_dump_json().encode()
        return self._respond(status, body, nonce, headers)

    async def _http_exception(self, request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        if status == 404:
            code, reason = ErrorCode.NOT_FOUND, f"no route {request.url.path}"
        elif status == 405:
            code, reason = (
                ErrorCode.INVALID_REQUEST,
                f"{request.method} is not allowed on {request.url.path}; use POST",
            )
        else:
            code, reason = ErrorCode.INTERNAL, str(getattr(exc, "detail", "error"))
        return self._error(status, code, reason, _claimed_nonce(request))

    # ------------------------------------------------------------------ lifecycle
    @contextlib.asynccontextmanager
    async def _lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        task: asyncio.Task[None] | None = None
        stop = asyncio.Event()
        if self.policy is not None and not self.insecure_disable_auth:
            if not self.policy.loaded:
                await self.policy.refresh()
            task = asyncio.create_task(self.policy.run(stop), name="metagraph-refresh")
        logger.info("signed server up hotkey=%s routes=%s", self.hotkey, sorted(self._routes))
        try:
            yield
        finally:
            stop.set()
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


__all__ = ["RunningServer", "ServerLimits", "SignedServer", "current_signed", "serve", "serve_in_thread"]
