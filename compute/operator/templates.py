"""Which base images (templates) each miner offers: ``register.py templates``.

Asks every serving miner (or one) for its ``TemplatesResponse`` concurrently, each under one
deadline, and never raises for a single miner: an offline or old miner is listed with its error
(a miner that predates templates answers 404 and offers only its default image).

Deliberately not here: choosing a machine (``discovery``) or allocating (``service``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from compute.operator.errors import OperatorError
from compute.operator.rpc import Client, MinerRef, call
from compute.protocol import TemplateInfo, TemplatesRequest, TemplatesResponse

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MinerTemplates:
    """The templates one miner offers, or why it could not say."""

    uid: int | None
    hotkey: str
    templates: tuple[TemplateInfo, ...] = ()
    error: str | None = None


async def _ask(client: Client, miner: MinerRef, deadline_s: float) -> MinerTemplates:
    try:
        reply = await asyncio.wait_for(call(client, miner, TemplatesRequest()), deadline_s)
    except asyncio.TimeoutError:
        return MinerTemplates(miner.uid, miner.hotkey, error=f"no answer within {deadline_s:.0f} s")
    except OperatorError as exc:
        return MinerTemplates(miner.uid, miner.hotkey, error=exc.message)
    assert isinstance(reply, TemplatesResponse)  # call() parses the route's response type
    return MinerTemplates(miner.uid, miner.hotkey, tuple(reply.templates))


async def offered_templates(
    client: Client, miners: Sequence[MinerRef], concurrency: int = 32, deadline_s: float = 30.0
) -> list[MinerTemplates]:
    """Each miner's templates, in uid order (at most ``concurrency`` asked at once)."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(miner: MinerRef) -> MinerTemplates:
        async with gate:
            return await _ask(client, miner, deadline_s)

    found = await asyncio.gather(*(one(m) for m in miners))
    logger.info("templates asked miners=%d answered=%d", len(found), sum(f.error is None for f in found))
    return sorted(found, key=lambda f: f.uid if f.uid is not None else 1 << 30)
