"""Which base images (templates) each miner offers: ``register.py templates``.

Asks every serving miner (or one) for its ``TemplatesResponse`` concurrently, each under one
deadline, and never raises for a single miner: an offline or old miner is listed with its error
(a miner that predates templates answers 404 and offers only its default image).

Deliberately not here: choosing a machine (``discovery``) or allocating (``service``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from compute.operator.rpc import Client, MinerRef, ask_all
from compute.protocol import TemplateInfo, TemplatesRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MinerTemplates:
    """The templates one miner offers, or why it could not say."""

    uid: int | None
    hotkey: str
    templates: tuple[TemplateInfo, ...] = ()
    error: str | None = None


async def offered_templates(
    client: Client, miners: Sequence[MinerRef], concurrency: int = 32, deadline_s: float = 30.0
) -> list[MinerTemplates]:
    """Each miner's templates, in uid order (at most ``concurrency`` asked at once)."""
    answers = await ask_all(client, miners, TemplatesRequest(), concurrency, deadline_s)
    found = [
        MinerTemplates(
            a.miner.uid, a.miner.hotkey, tuple(a.reply.templates) if a.error is None else (), a.error
        )
        for a in answers  # a reply is the route's parsed TemplatesResponse
    ]
    logger.info("templates asked miners=%d answered=%d", len(found), sum(f.error is None for f in found))
    return found
