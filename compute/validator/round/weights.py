"""Set weights on chain from the stored scores, with retries, never hanging on a chain call.

``WeightSetter.set`` runs the blocking ``Chain.set_weights`` in a thread under
``asyncio.wait_for`` (a stuck thread is abandoned, the loop goes on), retries rate limits,
unavailable endpoints, timeouts and other chain refusals (commit-reveal windows included) with
backoff, gives up at once on ``NotRegistered``, and logs every attempt in the store. Weights are
``normalise(consensus_credits(score x presence share, credit_step))`` over the uids currently
registered under the same hotkey (the presence share, ``compute.scoring.presence``, and the
consensus step, ``compute.scoring.consensus``, only ever lower a credit).
This module computes no scores.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from compute import VERSION_KEY
from compute.chain import Chain, ChainError, MetagraphSnapshot, NotRegistered
from compute.scoring import normalise, presence_credit
from compute.scoring.consensus import consensus_credits
from compute.store import ScoreRecord, ValidatorStore

log = logging.getLogger(__name__)


class WeightsError(Exception):
    """Weights could not be set (the reason is the last chain error)."""


def weights_from_scores(
    scores: Mapping[int, ScoreRecord],
    metagraph: MetagraphSnapshot,
    own_hotkey: str | None = None,
    credit_step: float = 0.0,
    factors: Mapping[int, float] | None = None,
    presence: Mapping[str, float] | None = None,
) -> dict[int, float]:
    """L1-normalised weights for registered uids whose stored hotkey still owns the uid.

    ``factors`` (uid -> a factor in [0, 1], e.g. the collateral posted) multiply each score first;
    a factor above 1 is read as 1, so a factor can only lower a credit. ``presence``: each hotkey's
    presence share (``compute.scoring.presence``): a credit is the score times the share (a hotkey
    without one gets 0); None: the scores alone (tools, tests). ``credit_step`` > 0 then floors
    each credit onto a geometric grid (the consensus step)."""
    current = {n.uid: n.hotkey for n in metagraph.neurons}
    factors = factors or {}
    kept = {
        uid: min(1.0, max(0.0, factors.get(uid, 1.0)))
        * (rec.score if presence is None else presence_credit(rec.score, rec.hotkey, presence))
        for uid, rec in scores.items()
        if current.get(uid) == rec.hotkey and rec.hotkey != own_hotkey
    }
    return {uid: w for uid, w in normalise(consensus_credits(kept, credit_step)).items() if w > 0}


@dataclass
class WeightSetter:
    chain: Chain
    wallet: object
    store: ValidatorStore
    version_key: int = VERSION_KEY
    call_timeout: float = 120.0
    attempts: int = 3
    backoff_s: float = 12.0

    async def set(self, weights: dict[int, float], block: int) -> None:
        """Submit ``weights``; raises ``WeightsError`` after the last failed attempt."""
        if not weights:
            raise WeightsError("no miner has a positive score yet; nothing to set")
        last: Exception | None = None
        for attempt in range(1, self.attempts + 1):
            try:
                await asyncio.wait_for(
                    asyncio.to_thread(self.chain.set_weights, self.wallet, dict(weights), self.version_key),
                    self.call_timeout,
                )
            except NotRegistered as exc:
                self.store.log_weights(block, weights, self.version_key, ok=False, error=str(exc))
                raise WeightsError(f"validator hotkey not registered: {exc}") from exc
            except (ChainError, asyncio.TimeoutError, ValueError) as exc:
                last = (
                    exc
                    if not isinstance(exc, asyncio.TimeoutError)
                    else TimeoutError(f"set_weights gave no answer in {self.call_timeout:.0f}s")
                )
                self.store.log_weights(
                    block, weights, self.version_key, ok=False, error=f"{type(exc).__name__}: {last}"
                )
                if isinstance(exc, ValueError) or attempt == self.attempts:
                    break
                wait = self.backoff_s * attempt
                log.warning(
                    "set_weights attempt %d failed (%s: %s); retry in %.0fs",
                    attempt,
                    type(exc).__name__,
                    last,
                    wait,
                )
                await asyncio.sleep(wait)
                continue
            self.store.log_weights(block, weights, self.version_key, ok=True)
            log.info("weights set block=%d uids=%d", block, len(weights))
            return
        raise WeightsError(f"set_weights failed after {self.attempts} attempts: {last}")
