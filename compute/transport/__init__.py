"""Signed miner transport: FastAPI server and httpx client over ``bittensor.http_auth`` (btauth/1).

Requests are authenticated by the SDK's btauth/1 headers; responses carry the miner hotkey's
``compute-resp/1`` signature. Access is gated on the authenticated hotkey by ``AccessPolicy``
(registration, validator permit, stake, allow/deny lists). See docs/transport.md.
"""

from __future__ import annotations

from .auth import (
    HEADER_RESPONSE_HOTKEY,
    HEADER_RESPONSE_SIGNATURE,
    KeptRequestError,
    KeyWallet,
    WalletError,
    load_wallet,
    response_message,
    sign_response,
    verify_kept_request,
    verify_response,
)
from .client import (
    BadResponseSignature,
    InvalidResponse,
    MinerClient,
    PeerUnreachable,
    Rejected,
    RequestTimeout,
    SignedExchange,
    TransportError,
)
from .guard import ConnectionGuard, GuardLimits, fit_to_nofile, raise_nofile_limit
from .policy import AccessPolicy, Forbidden, PolicyUnavailable
from .ratelimit import Busy, PrioritySemaphore, RateLimiter
from .server import (
    RawSigned,
    RunningServer,
    ServerLimits,
    SignedServer,
    current_signed,
    serve,
    serve_in_thread,
)

__all__ = [
    "HEADER_RESPONSE_HOTKEY",
    "HEADER_RESPONSE_SIGNATURE",
    "AccessPolicy",
    "BadResponseSignature",
    "ConnectionGuard",
    "GuardLimits",
    "Busy",
    "Forbidden",
    "InvalidResponse",
    "KeptRequestError",
    "KeyWallet",
    "MinerClient",
    "PeerUnreachable",
    "PolicyUnavailable",
    "PrioritySemaphore",
    "RateLimiter",
    "RawSigned",
    "Rejected",
    "RequestTimeout",
    "SignedExchange",
    "RunningServer",
    "ServerLimits",
    "SignedServer",
    "TransportError",
    "WalletError",
    "current_signed",
    "load_wallet",
    "fit_to_nofile",
    "raise_nofile_limit",
    "response_message",
    "serve",
    "serve_in_thread",
    "sign_response",
    "verify_kept_request",
    "verify_response",
]
