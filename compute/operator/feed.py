"""A validator's public machine feed (``/api/public/v1/machines``) for ``register.py --feed URL``.

The feed carries what one validator proved about each machine (GPUs and figures measured on its
own clock, when) and how often its tests found the machine there (uptime over 7 and 30 days). It
is fetched like the dashboard's proven figures (``compute.transport.signed_json``: a fresh nonce,
one deadline, a size cap) and believed only when a validator hotkey the caller trusts signed it
for this request; the feed must also name that same hotkey as its validator. Its machines become
``VerifiedGpus`` with their uptime, which ``rank`` orders by, and, when the feed has them, whether
the validator last saw the machine free or rented (and when) and the miner's signed price as the
validator last heard it (newer feeds; an older feed's machines simply lack them).

Deliberately not here: ranking (``discovery.rank``) or who is trusted (``proven.validator_signers``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import httpx

from compute.dashboard.feed import FeedMachine, MachineFeed
from compute.dashboard.feed_routes import FEED_PATH
from compute.operator.discovery import VerifiedGpus
from compute.operator.errors import UsageError
from compute.peertext import printable
from compute.transport.signed_json import NotSigned, SignedJsonError, fetch_signed_json

logger = logging.getLogger(__name__)

MAX_BODY = 16 * 1024 * 1024  # a 256-miner feed is ~0.35 MB


def feed_url(base: str) -> str:
    """``http://host:port`` (or the feed's own URL) -> the feed's URL."""
    url = httpx.URL(base)
    if url.scheme not in ("http", "https") or not url.host:
        raise UsageError(f"--feed must be an http(s) URL, got {base!r}")
    return str(url if url.path.rstrip("/") == FEED_PATH else url.join(FEED_PATH))


def _verified(machine: FeedMachine) -> VerifiedGpus | None:
    if not machine.gpu_model or machine.last_proven_at is None:
        return None  # tested, never proven: nothing to believe about its hardware
    week, month = machine.window(7), machine.window(30)
    return VerifiedGpus(
        machine.hotkey,
        machine.gpu_model,
        machine.gpu_count,
        machine.last_proven_at,
        tflops_fp16=machine.tflops_fp16,
        tflops_fp32=machine.tflops_fp32,
        memory_gb=machine.memory_gb,
        bandwidth_gbs=machine.bandwidth_gbs,
        uptime_7d=week.uptime if week is not None else None,
        uptime_30d=month.uptime if month is not None else None,
        first_proven_at=machine.first_proven_at,
        seen_state=machine.now.state if machine.now is not None else None,
        seen_at=machine.now.seen_at if machine.now is not None else None,
        feed_price_hour=machine.price.hourly(machine.gpu_count) if machine.price is not None else None,
    )


async def fetch_feed(base: str, signers: Collection[str], timeout: float = 15.0) -> dict[str, VerifiedGpus]:
    """The machines of the feed at ``base`` per hotkey, if one of ``signers`` signed it for this
    request and names itself as the feed's validator; ``UsageError`` otherwise (and for any fetch
    failure: unreachable, too slow, too large, unreadable)."""
    url = feed_url(base)
    try:
        signed = await fetch_signed_json(url, MachineFeed, signers, timeout_s=timeout, max_bytes=MAX_BODY)
    except NotSigned as exc:
        raise UsageError(f"machine feed {url}: {exc}; its figures are not used") from None
    except SignedJsonError as exc:
        raise UsageError(f"machine feed {exc}") from None
    feed = signed.value
    if feed.validator != signed.signer:
        raise UsageError(
            f"machine feed {url} names validator {printable(feed.validator, 64)} but was signed by "
            f"{signed.signer}; its figures are not used"
        )
    machines = {m.hotkey: v for m in feed.machines if (v := _verified(m)) is not None}
    logger.debug("machine feed %s: %d proven machines, signed by %s", url, len(machines), signed.signer)
    return machines


__all__ = ["MAX_BODY", "feed_url", "fetch_feed"]
