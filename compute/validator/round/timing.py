"""How long a validator round step may run, from the chain's actual block time.

``chain_block_seconds`` asks the chain client for its block time where it offers one (a
``block_time()`` method, as ``bt.Subtensor`` and the simulated chain have) and otherwise measures
it: the time between two block-height changes seen by polling ``block()`` (a few seconds at start-up
on a 12 s chain, under a second on a fast local one). ``round_step_timeout`` turns it into the
round loop's step timeout. No chain writes; no state kept.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from compute.chain import ChainError

log = logging.getLogger(__name__)

DEFAULT_BLOCK_SECONDS = 12.0  # subtensor's target; used only when nothing better is known
ROUND_SHARE = 0.9  # a round may use this share of its interval


def round_step_timeout(miner_timeout: float, round_blocks: int, block_seconds: float) -> float:
    """Seconds a round step may take: most of its interval, never under two miner timeouts."""
    return max(miner_timeout * 2, round_blocks * block_seconds * ROUND_SHARE)


async def measure_block_seconds(
    block: Callable[[], Awaitable[int]],
    max_wait: float = 45.0,
    clock: Callable[[], float] = time.monotonic,
    max_poll: float = 0.5,
) -> float | None:
    """Seconds per block between two observed height changes; None when none is seen in time."""
    deadline = clock() + max_wait
    poll = 0.02
    height = await block()
    first: tuple[float, int] | None = None  # (time, height) at the first change seen
    while clock() < deadline:
        await asyncio.sleep(poll)
        poll = min(poll * 1.5, max_poll)
        now_height, now = await block(), clock()
        if now_height <= height:
            continue
        if first is None:
            first, height = (now, now_height), now_height
            poll = 0.02
            continue
        return (now - first[0]) / (now_height - first[1])
    return None


async def chain_block_seconds(chain: Any, max_wait: float = 45.0) -> float:
    """The chain's block time in seconds: reported by the client, else measured, else 12 s."""
    reported = getattr(chain, "block_time", None)
    if callable(reported):
        try:
            value = float(await asyncio.wait_for(asyncio.to_thread(reported), 30))
            if math.isfinite(value) and value > 0:
                return value
            log.warning("chain reported block time %r; measuring instead", value)
        except (ChainError, asyncio.TimeoutError, OSError, ValueError, TypeError) as exc:
            log.warning("chain block time unavailable (%s); measuring instead", exc)

    async def block() -> int:
        return int(await asyncio.wait_for(asyncio.to_thread(chain.block), 30))

    try:
        measured = await measure_block_seconds(block, max_wait)
    except (ChainError, asyncio.TimeoutError, OSError) as exc:  # the validator still starts
        log.warning("cannot measure block time (%s)", exc)
        measured = None
    if measured is None or not measured > 0:
        log.warning("block time unknown; assuming %.0fs", DEFAULT_BLOCK_SECONDS)
        return DEFAULT_BLOCK_SECONDS
    log.info("block time measured: %.2fs", measured)
    return measured
