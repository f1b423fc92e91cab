"""The feed's two public views on the dashboard app: ``/api/public/v1/machines`` and ``/machines``.

Both are rate limited per address (``RateLimiter``) before any work, and built at most once a
minute however many ask (the feed is rebuilt from the store every ``FRESH_S``, reading only the
rows new since the last build: ``compute.store.feed.FeedReader``), so a flood costs
HTTP parsing and a token bucket. The JSON is handed to ``respond_json`` (the dashboard signs it
with the validator's hotkey: ``compute-json/1``, bound to the reader's ``?nonce=``); the page is
rendered from the same ``MachineFeed`` object.

Deliberately not here: what the feed holds (``compute.dashboard.feed``), signing itself.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bittensor.sp_core import Keypair
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, Response

from compute.collateral.standing import read_standing, standing_path
from compute.dashboard.feed import MachineFeed, build_feed
from compute.dashboard.feed_page import render_feed_page
from compute.dashboard.ratelimit import RateLimiter
from compute.store import StoreError
from compute.store.feed import FeedReader
from compute.transport.signed_json import NONCE_RE, signed_headers

log = logging.getLogger(__name__)

FEED_PATH = "/api/public/v1/machines"
PAGE_PATH = "/machines"
FRESH_S = 60.0
READ = ["GET", "HEAD"]
RespondJson = Callable[[str, bytes, "str | None"], Response]


def plain_json(path: str, body: bytes, nonce: str | None) -> Response:
    """The unsigned answer (a dashboard run without the validator's key)."""
    return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})


def signed_bytes(keypair: Keypair | None) -> RespondJson:
    """Answers signed with ``keypair`` (``compute-json/1`` over the reader's nonce; plain without)."""
    if keypair is None:
        return plain_json

    def respond(path: str, body: bytes, nonce: str | None) -> Response:
        nonce = nonce if nonce is not None and NONCE_RE.fullmatch(nonce) else ""
        headers = {"Cache-Control": "no-store", **signed_headers(keypair, path, body, nonce)}
        return Response(body, media_type="application/json", headers=headers)

    return respond


class _Fresh:
    """One value, rebuilt at most once per ``fresh_s``; concurrent askers wait for one build."""

    def __init__(self, fresh_s: float) -> None:
        self.fresh_s = fresh_s
        self._value: tuple[float, Any] | None = None
        self._lock = asyncio.Lock()

    async def get(self, produce: Callable[[], Awaitable[Any]]) -> Any:
        if self._value is not None and time.monotonic() - self._value[0] < self.fresh_s:
            return self._value[1]
        async with self._lock:
            if self._value is not None and time.monotonic() - self._value[0] < self.fresh_s:
                return self._value[1]
            value = await produce()
            self._value = (time.monotonic(), value)
            return value


def add_feed_routes(
    app: FastAPI,
    store_path: str | Path,
    *,
    validator: str | None = None,
    respond_json: RespondJson = plain_json,
    limiter: RateLimiter | None = None,
    fresh_s: float = FRESH_S,
    clock: Callable[[], float] = time.time,
) -> None:
    """Serve the machine feed of the store at ``store_path`` on ``app`` (``validator``: the signer)."""
    path = Path(store_path).expanduser()
    gate = Depends(limiter or RateLimiter())
    feed_cache, page_cache = _Fresh(fresh_s), _Fresh(fresh_s)

    reader, reading = FeedReader(path), threading.Lock()

    def build() -> tuple[MachineFeed, bytes]:
        with reading:  # a build that outlived its wait must finish before the next one reads
            feed = build_feed(reader.read(clock()), validator, read_standing(standing_path(path.parent)))
        return feed, feed.model_dump_json().encode()

    async def feed() -> tuple[MachineFeed, bytes]:
        try:  # one build at a time (the cache's lock): the reader keeps state between reads
            return await asyncio.wait_for(asyncio.to_thread(build), 60)
        except StoreError as exc:
            log.warning("machine feed cannot read %s: %s", path, exc)
            raise HTTPException(503, "validator store not readable yet") from exc

    async def page() -> str:
        return await asyncio.to_thread(render_feed_page, (await feed_cache.get(feed))[0])

    @app.api_route(FEED_PATH, methods=READ, dependencies=[gate])
    async def feed_json(nonce: str | None = None) -> Response:
        return respond_json(FEED_PATH, (await feed_cache.get(feed))[1], nonce)

    @app.api_route(PAGE_PATH, methods=READ, response_class=HTMLResponse, dependencies=[gate])
    async def feed_html() -> HTMLResponse:
        return HTMLResponse(await page_cache.get(page))


__all__ = ["FEED_PATH", "PAGE_PATH", "add_feed_routes", "plain_json", "signed_bytes"]
