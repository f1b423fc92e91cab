"""Every miner can read why it scored what it did: its round verdict, sent to it after the round.

When a round closes, each tested miner gets a ``VerdictRequest`` (signed by this validator like
every request): ok, sample, the reasons the result recorded, its moving-average score, and the
figures measured on the validator's clock (TFLOPS, proven memory and bandwidth, the round trip to
its lease). With an explanation (``compute.scoring.explain``), its first reason is the sample's
terms in one line, prefixed ``terms: ``: a reason, not a new field, because ``VerdictRequest``
forbids unknown fields and a miner of an older release would refuse the whole verdict. Best effort and bounded: a miner that is gone, slow or too old to know the message
(404) loses nothing and delays nothing beyond ``TELL_TIMEOUT_S``. The verdict explains; it never
changes a score.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable, Mapping

from compute.protocol import VerdictFigures, VerdictRequest
from compute.scoring import Explanation
from compute.store import PogResult
from compute.transport import MinerClient, TransportError
from compute.validator.params import MinerTarget

log = logging.getLogger(__name__)

TELL_TIMEOUT_S = 10.0
TELL_CONCURRENCY = 16
REASON_CHARS = 400
EXPLAINED = "terms: "  # the reason that carries the sample's explanation starts with this


def _figure(value: float | None, scale: float = 1.0) -> float | None:
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return min(value * scale, 1e9)


def verdict_of(
    result: PogResult, score: float | None = None, explanation: Explanation | None = None
) -> VerdictRequest:
    """The message telling ``result``'s miner its verdict (reasons cut to fit the wire's bounds);
    ``explanation``'s line first when there is one."""
    rtt = result.timings.get("rtt_s") if result.timings else None
    explained = (EXPLAINED + explanation.line(),) if explanation is not None else ()
    figures = VerdictFigures(
        tflops_fp16=_figure(result.tflops_fp16),
        tflops_fp32=_figure(result.tflops_fp32),
        memory_gbs=_figure(result.mem_gbs),
        memory_gb=_figure(result.mem_proven_gb),
        round_trip_ms=_figure(rtt, 1000.0),
        sustained_factor=_figure(result.sustained_factor),
        rented_fraction=_figure(result.rented_fraction),
    )
    return VerdictRequest(
        round_id=max(0, result.round_id),
        block=max(0, result.block),
        ok=result.ok,
        sample=_figure(result.sample) or 0.0,
        score=_figure(score),
        reasons=[reason[:REASON_CHARS] for reason in (*explained, *result.reasons)[:16]],
        figures=figures,
    )


async def tell_miners(
    client: MinerClient,
    results: Iterable[PogResult],
    targets: Mapping[int, MinerTarget],
    scores: Mapping[int, float] | None = None,
    explanations: Mapping[int, Explanation] | None = None,
) -> int:
    """Send each result's miner its verdict; how many miners took it (never raises)."""
    gate = asyncio.Semaphore(TELL_CONCURRENCY)

    async def tell(result: PogResult) -> bool:
        target = targets.get(result.uid)
        if target is None or target.hotkey != result.hotkey:
            return False
        async with gate:
            try:
                message = verdict_of(
                    result, (scores or {}).get(result.uid), (explanations or {}).get(result.uid)
                )
                await client.call(target.endpoint, target.hotkey, message, timeout=TELL_TIMEOUT_S)
            except (TransportError, asyncio.TimeoutError, ValueError) as exc:
                log.debug("uid=%d verdict not delivered: %s", result.uid, exc)
                return False
        return True

    told = await asyncio.gather(*(tell(r) for r in results))
    return sum(told)


__all__ = ["EXPLAINED", "TELL_TIMEOUT_S", "tell_miners", "verdict_of"]
