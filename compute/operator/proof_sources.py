"""Where a renter's proven figures come from: a validator's store, its dashboard, its public feed.

``gather_proofs`` reads the sources a renter named (register.py's flags, the SDK's arguments), each
signed source believed only when a trusted validator signed it (``proven``, ``feed``), and keeps
each proof only while it is at most ``max_age_h`` hours old (``pog_records.fresh_proofs``): a
machine proven last week may have left since. A later source's fresh proof wins over an earlier
one's for the same hotkey; a stale one replaces nothing.

Deliberately not here: how each source is fetched or checked (their own modules).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from compute.chain import MetagraphSnapshot
from compute.operator.discovery import VerifiedGpus
from compute.operator.feed import fetch_feed
from compute.operator.pog_records import DEFAULT_MAX_PROOF_AGE_H, fresh_proofs, load_verified
from compute.operator.proven import DEFAULT_SIGNER_SHARE, fetch_proven, validator_signers


@dataclass(frozen=True)
class ProofSources:
    """``pog_db``: a validator store (file or data dir); ``dashboard``/``feed``: URLs whose figures
    count when signed by ``pinned`` or by a validator holding ``signer_share`` of the stake."""

    pog_db: str | None = None
    dashboard: str | None = None
    feed: str | None = None
    pinned: str | None = None
    signer_share: float = DEFAULT_SIGNER_SHARE
    max_age_h: float = DEFAULT_MAX_PROOF_AGE_H


async def gather_proofs(
    sources: ProofSources, metagraph: Callable[[], MetagraphSnapshot], timeout: float
) -> dict[str, VerifiedGpus]:
    """The fresh proofs of every named source, per miner hotkey."""
    now, age = time.time(), sources.max_age_h
    verified: dict[str, VerifiedGpus] = {}
    if sources.pog_db:
        stored = await asyncio.to_thread(load_verified, sources.pog_db)
        verified = fresh_proofs(stored, now, age, sources.pog_db)
    if sources.dashboard or sources.feed:
        signers = await validator_signers(metagraph, sources.pinned, sources.signer_share)
        if sources.dashboard:
            proven = await fetch_proven(sources.dashboard, signers, timeout)
            verified = {**verified, **fresh_proofs(proven, now, age, sources.dashboard)}
        if sources.feed:
            fed = await fetch_feed(sources.feed, signers, timeout)
            verified = {**verified, **fresh_proofs(fed, now, age, sources.feed)}
    return verified
