"""Signed JSON views (``compute-json/1``): a body a hotkey vouches for, fetched under a deadline.

A validator's dashboard publishes what it proved (``/api/machines``, and any later public feed);
whoever reads it over plain HTTP must know the figures are the validator's, and fresh. The server
signs, with its hotkey, ``b"compute-json/1|" + path + b"|" + nonce + b"|" + signed_at_ms + b"|" +
sha256(body).hexdigest()`` and sends the signature, signer, time and nonce as headers
(:func:`signed_headers`, :func:`signed_json_response`); the body is the plain JSON, unchanged. The
reader (:func:`fetch_signed_json`) sends a fresh random nonce (``?nonce=``) so an old answer
cannot be replayed, reads at most ``max_bytes`` under one total deadline (not per socket read),
then checks nonce, signature and that the signer is one it trusts, and only then parses the body.

What it deliberately does not do: decide whom to trust (the caller passes the signers, e.g. the
validator-permitted hotkeys of the metagraph) or cache anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
from bittensor.sp_core import Keypair
from bittensor.sp_core import verify as _sp_verify
from pydantic import BaseModel, ValidationError

from compute.peertext import printable

SCHEME = b"compute-json/1"
HEADER_SIGNER = "X-Compute-Signer"
HEADER_SIGNATURE = "X-Compute-Signature"
HEADER_SIGNED_AT = "X-Compute-Signed-At"  # milliseconds since the epoch, the signer's clock
HEADER_NONCE = "X-Compute-Nonce"
NONCE_RE = re.compile(r"^[A-Za-z0-9_-]{0,64}$")
DEFAULT_TIMEOUT_S = 15.0
DEFAULT_MAX_BYTES = 32 << 20

M = TypeVar("M", bound=BaseModel)


class SignedJsonError(Exception):
    """Root: the view could not be fetched, or is not what a trusted signer said."""


class FetchFailed(SignedJsonError):
    """Unreachable, an HTTP error status, or no complete answer within the deadline."""


class TooLarge(SignedJsonError):
    """The answer is (or declares itself) larger than the cap."""


class NotSigned(SignedJsonError):
    """No signature, a signature that does not verify, a stale nonce, or an untrusted signer."""


class Unreadable(SignedJsonError):
    """Signed, but not the expected JSON shape."""


@dataclass(frozen=True)
class SignedJson(Generic[M]):
    value: M
    signer: str  # ss58 of the hotkey that signed it
    signed_at: float  # seconds, the signer's clock


def message(path: str, nonce: str, signed_at_ms: int, body: bytes) -> bytes:
    """The exact bytes a ``compute-json/1`` signature covers."""
    digest = hashlib.sha256(body).hexdigest().encode()
    return b"|".join((SCHEME, path.encode(), nonce.encode(), str(int(signed_at_ms)).encode(), digest))


def signed_headers(
    keypair: Keypair, path: str, body: bytes, nonce: str = "", now: float | None = None
) -> dict[str, str]:
    """Headers that vouch for ``body`` served at ``path`` to the reader that sent ``nonce``."""
    if not NONCE_RE.fullmatch(nonce):
        raise ValueError("a nonce is at most 64 of A-Z a-z 0-9 _ -")
    signed_at_ms = int((time.time() if now is None else now) * 1000)
    signature = "0x" + bytes(keypair.sign(message(path, nonce, signed_at_ms, body))).hex()
    return {
        HEADER_SIGNER: keypair.ss58_address,
        HEADER_SIGNATURE: signature,
        HEADER_SIGNED_AT: str(signed_at_ms),
        HEADER_NONCE: nonce,
    }


def signed_json_response(keypair: Keypair | None, path: str, value: BaseModel, nonce: str | None) -> Any:
    """A FastAPI ``Response`` of ``value`` as JSON, signed when a keypair is given (else plain).

    ``nonce``: the reader's ``?nonce=`` (None or invalid: signed without one)."""
    from fastapi.responses import Response

    body = value.model_dump_json().encode()
    headers = {"Cache-Control": "no-store"}
    if keypair is not None:
        nonce = nonce if nonce is not None and NONCE_RE.fullmatch(nonce) else ""
        headers |= signed_headers(keypair, path, body, nonce)
    return Response(content=body, media_type="application/json", headers=headers)


def verify(
    headers: httpx.Headers | dict[str, str],
    path: str,
    nonce: str,
    body: bytes,
    signers: Collection[str] | None,
) -> tuple[str, float]:
    """(signer, signed_at) when ``headers`` vouch for ``body`` at ``path`` for ``nonce``.

    ``signers``: the hotkeys trusted (None: any signer, for display only). Raises :class:`NotSigned`."""
    signer, signature = headers.get(HEADER_SIGNER), headers.get(HEADER_SIGNATURE)
    stamp, echoed = headers.get(HEADER_SIGNED_AT, ""), headers.get(HEADER_NONCE)
    if not signer or not signature:
        raise NotSigned("the answer is not signed")
    if echoed != nonce:
        raise NotSigned("the answer was signed for another request (a replay?)")
    if not stamp.isdigit() or len(stamp) > 16:
        raise NotSigned("the answer's signing time is unreadable")
    try:
        raw = bytes.fromhex(signature.removeprefix("0x"))
        good = bool(_sp_verify(message(path, nonce, int(stamp), body), raw, signer))
    except (ValueError, TypeError):
        good = False
    if not good:
        raise NotSigned(f"the signature of {printable(signer, 64)} does not verify")
    if signers is not None and signer not in signers:
        raise NotSigned(f"signed by {printable(signer, 64)}, which is not a trusted validator hotkey")
    return signer, int(stamp) / 1000.0


async def fetch_signed_json(
    url: str,
    model: type[M],
    signers: Collection[str] | None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_BYTES,
    transport: httpx.AsyncBaseTransport | None = None,
) -> SignedJson[M]:
    """GET ``url`` with a fresh nonce; the parsed ``model`` if a trusted signer vouches for it."""
    nonce = secrets.token_hex(16)
    target = httpx.URL(url).copy_merge_params({"nonce": nonce})
    try:
        status, headers, body = await asyncio.wait_for(
            _get(target, max_bytes, timeout_s, transport), timeout_s
        )
    except asyncio.TimeoutError:
        raise FetchFailed(f"{url}: no complete answer within {timeout_s:g}s") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"{url}: {type(exc).__name__}: {printable(exc, 200)}") from None
    if status != 200:
        raise FetchFailed(f"{url} answered {status}: {printable(body[:200].decode(errors='replace'))}")
    signer, signed_at = verify(headers, target.path, nonce, body, signers)
    try:
        value = model.model_validate_json(body)
    except ValidationError as exc:
        raise Unreadable(
            f"{url}: not a valid {model.__name__}: {printable(exc.errors()[0]['msg'], 200)}"
        ) from None
    return SignedJson(value, signer, signed_at)


async def _get(
    url: httpx.URL, max_bytes: int, timeout_s: float, transport: httpx.AsyncBaseTransport | None
) -> tuple[int, httpx.Headers, bytes]:
    async with httpx.AsyncClient(
        timeout=timeout_s, follow_redirects=False, trust_env=False, transport=transport
    ) as client:
        async with client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as reply:
            declared = reply.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise TooLarge(f"{url} declares {declared} bytes, more than {max_bytes}")
            chunks, size = [], 0
            async for chunk in reply.aiter_bytes():  # decoded: the cap holds after decompression
                size += len(chunk)
                if size > max_bytes:
                    raise TooLarge(f"{url} sent more than {max_bytes} bytes")
                chunks.append(chunk)
            return reply.status_code, reply.headers, b"".join(chunks)


__all__ = [
    "FetchFailed",
    "HEADER_NONCE",
    "HEADER_SIGNATURE",
    "HEADER_SIGNED_AT",
    "HEADER_SIGNER",
    "NotSigned",
    "SignedJson",
    "SignedJsonError",
    "TooLarge",
    "Unreadable",
    "fetch_signed_json",
    "message",
    "signed_headers",
    "signed_json_response",
    "verify",
]
