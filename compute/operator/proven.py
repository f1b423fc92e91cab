"""Proven machines from a validator's dashboard (``/api/machines``), for ``register.py resources``.

The validator publishes, read-only, the figures it measured itself (GPU model and count, TFLOPS,
proven memory, bandwidth, when); this module fetches them over HTTP, validates the body with the
dashboard's pydantic model and returns ``VerifiedGpus`` per hotkey, the same shape
``pog_records.load_verified`` reads from a store file. A miner's own claims never enter here.

Deliberately not here: discovery, ranking, or trusting an unparsable answer (it is refused).
"""

from __future__ import annotations

import logging

import httpx
from pydantic import ValidationError

from compute.dashboard import ProvenMachines
from compute.operator.discovery import VerifiedGpus
from compute.operator.errors import UsageError

logger = logging.getLogger(__name__)

MAX_BODY = 32 * 1024 * 1024


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


async def fetch_proven(base: str, timeout: float = 15.0) -> dict[str, VerifiedGpus]:
    """Proven machines per hotkey from the dashboard at ``base``; ``UsageError`` when unusable."""
    url = machines_url(base)
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            reply = await client.get(url)
    except httpx.HTTPError as exc:
        raise UsageError(f"cannot reach the validator dashboard at {url}: {exc}") from exc
    if reply.status_code != 200:
        raise UsageError(f"validator dashboard {url} answered {reply.status_code}: {reply.text[:200]}")
    if len(reply.content) > MAX_BODY:
        raise UsageError(f"validator dashboard {url} sent {len(reply.content)} bytes; refusing")
    try:
        body = ProvenMachines.model_validate_json(reply.content)
    except ValidationError as exc:
        raise UsageError(f"validator dashboard {url} sent an unreadable machine list: {exc}") from exc
    verified = to_verified(body)
    logger.debug("loaded proven machines=%d from %s", len(verified), url)
    return verified
