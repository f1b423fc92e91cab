"""The operator's private view of the dashboard, behind the validator's own hotkey.

What the validator learnt about machines (GPU UUIDs, lease endpoints and host keys, timings, which
uids it ties to one device, and whatever it records later that is not on the public list of
``compute.dashboard.views``) is served at ``PRIVATE_PATH`` only to a request signed with btauth/1
(``bittensor.http_auth``, the signatures miners check on every validator request) by the
validator's own hotkey, addressed to it, fresh and never replayed: 401 for a request that is
unsigned, malformed, stale or replayed, 403 for one signed by any other hotkey. The dashboard
serves it only when asked to (``--dashboard.full``) and only when it holds the validator's hotkey.

``fetch_private(url, wallet)`` is the operator's side (``python -m compute dashboard --private
URL``): one signed GET, one deadline, a byte cap.

Deliberately not here: sessions, cookies or passwords (a browser cannot sign; the operator reads the
private view with the validator's wallet, on the validator's machine).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from bittensor import http_auth
from fastapi import HTTPException, Request

from compute.transport import KeyWallet

PRIVATE_PATH = "/api/private/overview"
MAX_PRIVATE_BYTES = 256 * 1024 * 1024
GET = "GET"


class PrivateGate:
    """A FastAPI dependency: the request must be signed by ``validator`` (its own hotkey)."""

    def __init__(self, validator: str) -> None:
        self.validator = validator
        self._nonces = http_auth.InMemoryNonceStore()

    async def __call__(self, request: Request) -> None:
        try:
            caller = http_auth.verify(
                request.headers,
                b"",
                method=GET,
                path=request.url.path,
                self_hotkey_ss58=self.validator,
                nonce_store=self._nonces,
            )
        except http_auth.AuthError as exc:
            raise HTTPException(
                401, f"sign the request with the validator's hotkey (btauth/1): {exc}"
            ) from None
        if caller.hotkey_ss58 != self.validator:
            raise HTTPException(403, "only the validator's own hotkey may read the private view")


class PrivateFetchError(Exception):
    """The private view could not be read (refused, unreachable, too large or not JSON)."""


async def fetch_private(url: str, wallet: Any, timeout_s: float = 30.0) -> dict[str, Any]:
    """The private overview of the dashboard at ``url``, read with ``wallet`` (the validator's)."""
    keys = KeyWallet.from_wallet(wallet)
    headers = http_auth.sign(keys, method=GET, path=PRIVATE_PATH, body=b"", receiver_ss58=keys.ss58)
    target = url.rstrip("/") + PRIVATE_PATH
    body = bytearray()

    async def read() -> int:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            async with client.stream(GET, target, headers=headers) as answer:
                async for chunk in answer.aiter_bytes():
                    body.extend(chunk)
                    if len(body) > MAX_PRIVATE_BYTES:
                        raise PrivateFetchError(f"{target} sent more than {MAX_PRIVATE_BYTES} bytes")
                return answer.status_code

    try:
        status = await asyncio.wait_for(read(), timeout_s)
    except (httpx.HTTPError, asyncio.TimeoutError) as exc:
        raise PrivateFetchError(
            f"{target} did not answer within {timeout_s:g} s: {exc or type(exc).__name__}"
        ) from exc
    if status != 200:
        shown = bytes(body[:300]).decode(errors="replace")
        raise PrivateFetchError(f"{target} answered {status}: {shown}")
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise PrivateFetchError(f"{target} did not answer JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise PrivateFetchError(f"{target} did not answer a JSON object")
    return value


__all__ = ["PRIVATE_PATH", "PrivateFetchError", "PrivateGate", "fetch_private"]
