"""Proven machines from a validator's dashboard (``/api/machines``), for ``register.py resources``.

The validator publishes, read-only, the figures it measured itself (GPU model and count, TFLOPS,
proven memory, bandwidth, when), signed by its hotkey (``compute-json/1``). This module fetches
them with a fresh nonce under one deadline and a size cap, believes them only when a validator
hotkey the caller trusts signed them for this request, validates the body with the dashboard's
pydantic model and returns ``VerifiedGpus`` per hotkey, the same shape ``pog_records.load_verified``
reads from a store file. A miner's own claims never enter here.

Deliberately not here: discovery, ranking, or trusting an unsigned, stale or unparsable answer
(each is refused with the reason).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

import httpx

from compute.chain import MetagraphSnapshot
from compute.dashboard import ProvenMachines
from compute.operator.discovery import VerifiedGpus
from compute.operator.errors import UsageError
from compute.transport.signed_json import NotSigned, SignedJsonError, fetch_signed_json

logger = logging.getLogger(__name__)

MAX_BODY = 32 * 1024 * 1024
DEFAULT_SIGNER_SHARE = 0.05  # of the validator stake: a permit alone (a miner may hold one) is not enough


def machines_url(base: str) -> str:
    """``http://host:port`` (or with a trailing path) -> its ``/api/machines`` URL."""
    url = httpx.URL(base)
    if url.scheme not in ("http", "https") or not url.host:
        raise UsageError(f"--register.dashboard must be an http(s) URL, got {base!r}")
    return str(url.join("/api/machines"))


def to_verified(body: ProvenMachines) -> dict[str, VerifiedGpus]:
    verified: dict[str, VerifiedGpus] = {}
    for m in body.machines:
        if m.gpu_count <= 0 or not m.gpu_model:
            continue
        verified[m.hotkey] = VerifiedGpus(
            m.hotkey,
            m.gpu_model,
            m.gpu_count,
            m.verified_at,
            tflops_fp16=m.tflops_fp16,
            tflops_fp32=m.tflops_fp32,
            memory_gb=m.memory_gb,
            bandwidth_gbs=m.bandwidth_gbs,
        )
    return verified


async def validator_signers(
    metagraph: Callable[[], MetagraphSnapshot],
    pinned: str | None = None,
    min_share: float = DEFAULT_SIGNER_SHARE,
) -> set[str]:
    """Who may sign dashboard figures and machine feeds: the validator-permitted hotkeys holding at
    least ``min_share`` of the validator stake (a permit alone is not enough: a miner holding one
    could publish its own figures), or the one ``pinned`` of the permitted hotkeys."""
    snapshot = await asyncio.to_thread(metagraph)
    permitted = {n.hotkey: n.stake for n in snapshot.neurons if n.validator_permit}
    if pinned is not None:
        if pinned not in permitted:
            raise UsageError(f"dashboard hotkey {pinned} has no validator permit on netuid {snapshot.netuid}")
        return {pinned}
    total = sum(permitted.values())
    return {h for h, stake in permitted.items() if total > 0 and stake >= min_share * total}


async def fetch_proven(base: str, signers: Collection[str], timeout: float = 15.0) -> dict[str, VerifiedGpus]:
    """Proven machines per hotkey from the dashboard at ``base``, signed by one of ``signers``
    (validator hotkeys); ``UsageError`` when unusable, unsigned or signed by anyone else."""
    url = machines_url(base)
    try:
        signed = await fetch_signed_json(url, ProvenMachines, signers, timeout_s=timeout, max_bytes=MAX_BODY)
    except NotSigned as exc:
        raise UsageError(
            f"validator dashboard {url}: {exc}; its figures are not used (only figures a validator "
            "signed for this request are)"
        ) from None
    except SignedJsonError as exc:
        raise UsageError(f"validator dashboard {exc}") from None
    verified = to_verified(signed.value)
    logger.debug("loaded proven machines=%d from %s signed by %s", len(verified), url, signed.signer)
    return verified
