"""Fetch what other validators serve: the leases they watch, their probes, their evidence.

Nothing fetched is trusted: reports are re-checked (both parties' signatures), probes and evidence
carry their validators' signatures, which the desk verifies before use. A peer that is down, slow
or answers garbage costs one bounded request and is skipped. What it deliberately does not do:
decide anything (``judging``) or keep anything (``book``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
from pydantic import ValidationError

from compute import safejson
from compute.collateral import EvidenceError
from compute.collateral.evidence import LeaseProbe, SignedEvidence, parse_signed
from compute.collateral.lease import LeaseReport

log = logging.getLogger(__name__)
MAX_BYTES = 4 * 1024 * 1024


class Peers:
    def __init__(self, urls: tuple[str, ...], timeout_s: float = 10.0) -> None:
        self.urls = tuple(url.rstrip("/") for url in urls)
        self.timeout_s = timeout_s

    async def _get(self, http: httpx.AsyncClient, url: str) -> Any | None:
        try:
            response = await asyncio.wait_for(http.get(url), self.timeout_s)
        except (httpx.HTTPError, asyncio.TimeoutError, OSError) as error:
            log.debug("collateral peer %s: %s", url, error)
            return None
        if response.status_code != 200 or len(response.content) > MAX_BYTES:
            return None
        try:
            return safejson.loads(response.content)
        except ValueError:
            return None

    async def _all(self, path: str) -> list[Any]:
        async with httpx.AsyncClient(timeout=self.timeout_s, trust_env=False) as http:
            answers = await asyncio.gather(*(self._get(http, url + path) for url in self.urls))
        return [a for a in answers if a is not None]

    async def watched(self) -> list[LeaseReport]:
        out = []
        for answer in await self._all("/collateral/watch"):
            for raw in answer.get("reports", []) if isinstance(answer, dict) else []:
                try:
                    out.append(LeaseReport.model_validate(raw))
                except ValidationError:
                    continue
        return out

    async def probes(self, lease_id: str) -> list[LeaseProbe]:
        out = []
        for raw in await self._all(f"/collateral/probes/{lease_id}"):
            try:
                out.append(LeaseProbe.model_validate(raw))
            except ValidationError:
                continue
        return out

    async def evidence(self) -> list[SignedEvidence]:
        out = []
        for answer in await self._all("/collateral/evidence"):
            for raw in answer.get("evidence", []) if isinstance(answer, dict) else []:
                try:
                    out.append(parse_signed(json.dumps(raw)))
                except EvidenceError:
                    continue
        return out


__all__ = ["Peers"]
