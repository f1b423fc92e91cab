"""One signed call to one miner, with transport failures turned into operator errors.

The transport (``compute.transport.MinerClient``) signs the request, checks the response
signature against the hotkey we meant to reach and raises its own errors; this module maps them
onto ``compute.operator.errors`` so that the CLI can print one clear sentence and exit with the
right code. It does not retry: callers decide whether another miner should be tried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from compute.operator.errors import (
    MinerIdentityError,
    MinerOffline,
    OperatorError,
    Refused,
    from_rejection,
)
from compute.protocol import Message
from compute.transport import (
    BadResponseSignature,
    InvalidResponse,
    PeerUnreachable,
    Rejected,
    RequestTimeout,
    SignedExchange,
    TransportError,
)

logger = logging.getLogger(__name__)


class Client(Protocol):
    async def call(
        self, endpoint: str, hotkey: str, request: Message, *, record: list[SignedExchange] | None = None
    ) -> Any: ...


@dataclass(frozen=True)
class MinerRef:
    """Where a miner is: its hotkey (whose signature we check), uid and axon endpoint."""

    hotkey: str
    endpoint: str | None
    uid: int | None = None

    def label(self) -> str:
        uid = "?" if self.uid is None else str(self.uid)
        return f"uid {uid} ({self.hotkey[:10]}…)"


async def call(
    client: Client, miner: MinerRef, request: Message, record: list[SignedExchange] | None = None
) -> Any:
    """Send ``request`` to ``miner``; raise an ``OperatorError`` subclass on any failure.

    With ``record``, the signed exchange (request and the miner's signed answer) is appended to it."""
    if not miner.endpoint:
        raise MinerOffline(f"miner {miner.label()} is not serving an axon")
    try:
        if record is not None:
            return await client.call(miner.endpoint, miner.hotkey, request, record=record)
        return await client.call(miner.endpoint, miner.hotkey, request)
    except Rejected as exc:
        logger.info(
            "miner refused hotkey=%s kind=%s code=%s", miner.hotkey, getattr(request, "kind", "?"), exc.code
        )
        raise from_rejection(exc.code, exc.reason, miner.hotkey) from exc
    except RequestTimeout as exc:
        raise MinerOffline(f"miner {miner.label()} at {miner.endpoint} timed out") from exc
    except PeerUnreachable as exc:
        raise MinerOffline(f"miner {miner.label()} at {miner.endpoint} is unreachable: {exc}") from exc
    except BadResponseSignature as exc:
        raise MinerIdentityError(
            f"the answer from {miner.endpoint} was not signed by {miner.hotkey}: {exc}"
        ) from exc
    except InvalidResponse as exc:
        raise MinerIdentityError(f"miner {miner.label()} sent a malformed answer: {exc}") from exc
    except TransportError as exc:
        raise Refused(f"call to miner {miner.label()} failed: {exc}") from exc


@dataclass(frozen=True)
class Answer:
    """One miner's reply to :func:`ask_all`, or why there is none."""

    miner: MinerRef
    reply: Any = None
    error: str | None = None


async def ask_all(
    client: Client, miners: Sequence[MinerRef], request: Message, concurrency: int, deadline_s: float
) -> list[Answer]:
    """``request`` to every miner (at most ``concurrency`` at once, each within ``deadline_s``), in
    uid order; never raises for one miner: its failure is the answer's ``error``."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(miner: MinerRef) -> Answer:
        async with gate:
            try:
                return Answer(miner, await asyncio.wait_for(call(client, miner, request), deadline_s))
            except asyncio.TimeoutError:
                return Answer(miner, error=f"no answer within {deadline_s:.0f} s")
            except OperatorError as exc:
                return Answer(miner, error=exc.message)

    found = await asyncio.gather(*(one(m) for m in miners))
    return sorted(found, key=lambda a: a.miner.uid if a.miner.uid is not None else 1 << 30)
