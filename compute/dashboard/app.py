"""The dashboard's FastAPI app: GET (and HEAD) views over a validator store opened read-only.

``/`` is the HTML page, ``/miner/{uid}`` one miner's page (why it scored what it did, its lease
state now, its recent rounds: ``miner_page``), ``/api/overview`` the same snapshot as JSON,
``/api/machines`` the proven machines (``register.py resources`` reads it), ``/healthz`` liveness. Each request opens its own
``mode=ro`` SQLite connection in a worker thread, so the validator's writer is never blocked and a
dashboard bug can never change the store; a view is read and rendered at most once per
``FRESH_S`` (5 s), however many ask, so a page flood costs HTTP parsing and little else.

Every route but one is public and unauthenticated: the page and ``/api/overview`` show the public
view (:mod:`compute.dashboard.views`: the fields on its list, reasons scrubbed; no GPU UUIDs, lease
endpoints, host keys, timings, shared-device evidence or canary signers). ``/api/machines`` is
signed with the validator's hotkey when one is given (``compute-json/1``,
:mod:`compute.transport.signed_json`, bound to the reader's ``?nonce=``), so that ``register.py``
can trust its figures over plain HTTP. With ``full=True`` (``--dashboard.full``) and the validator's
hotkey, the whole snapshot is also served at ``/api/private/overview``, only to requests signed by
that hotkey (:mod:`compute.dashboard.private`).

Deliberately not here: writing, or serving files from disk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bittensor.sp_core import Keypair
from fastapi import Depends, FastAPI, HTTPException
from fastapi import Path as UrlPath
from fastapi.responses import HTMLResponse, Response

from compute.dashboard.feed_routes import add_feed_routes, signed_bytes
from compute.dashboard.live import MinerDetail, PresenceView, miner_detail, presence_view
from compute.dashboard.miner_page import explain_latest, render_miner_page
from compute.dashboard.models import ProvenMachines, proven_machine
from compute.dashboard.private import PRIVATE_PATH, PrivateGate
from compute.dashboard.render import render_page
from compute.dashboard.views import public_json, public_overview
from compute.scoring import (
    GpuTable,
    GpuTableError,
    HolisticConfig,
    ScoringError,
    load_gpu_table,
    load_holistic_config,
)
from compute.store import Overview, StoreError, overview, verified_machines
from compute.transport.signed_json import signed_json_response

log = logging.getLogger(__name__)
READ = ["GET", "HEAD"]
FRESH_S = 5.0  # a snapshot is reused this long: a page flood re-reads and re-renders nothing


class _Snapshots:
    """The latest result of each view for ``FRESH_S``; one producer at a time per view."""

    def __init__(self, fresh_s: float = FRESH_S) -> None:
        self.fresh_s = fresh_s
        self._kept: dict[str, tuple[float, Any]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, view: str, produce: Callable[[], Awaitable[Any]]) -> Any:
        kept = self._kept.get(view)
        if kept is not None and time.monotonic() - kept[0] < self.fresh_s:
            return kept[1]
        async with self._locks.setdefault(view, asyncio.Lock()):
            kept = self._kept.get(view)
            if kept is not None and time.monotonic() - kept[0] < self.fresh_s:
                return kept[1]  # made by the request this one queued behind
            value = await produce()
            self._kept[view] = (time.monotonic(), value)
            return value


async def _overview(store_path: Path, days: float) -> Overview:
    try:
        return await asyncio.wait_for(asyncio.to_thread(overview, store_path, days), 30)
    except StoreError as exc:
        log.warning("dashboard cannot read %s: %s", store_path, exc)
        raise HTTPException(503, f"validator store not readable yet: {exc}") from exc


async def _presence(store_path: Path) -> PresenceView:
    try:
        return await asyncio.wait_for(asyncio.to_thread(presence_view, store_path), 30)
    except StoreError as exc:
        log.warning("dashboard cannot read the presence log of %s: %s", store_path, exc)
        return PresenceView()


def _scoring_inputs() -> tuple[GpuTable | None, HolisticConfig | None]:
    """The GPU table and scoring config the validator reads (same files, same env overrides)."""
    try:
        return load_gpu_table(), load_holistic_config()
    except (GpuTableError, ScoringError) as exc:  # the page then names the identified model
        log.warning("dashboard explains scores without the GPU table: %s", exc)
        return None, None


def build_app(
    store_path: str | Path,
    days: float = 30.0,
    title: str = "Validator dashboard",
    *,
    full: bool = False,
    keypair: Keypair | None = None,
) -> FastAPI:
    """A read-only dashboard over the validator store at ``store_path`` (it may not exist yet).

    ``keypair``: the validator's hotkey, to sign ``/api/machines``; ``full``: also serve the private
    view to requests signed by that hotkey (``ValueError`` without one: nobody could read it)."""
    if full and keypair is None:
        raise ValueError("the private view (--dashboard.full) needs the validator's hotkey (--wallet.name)")
    path = Path(store_path).expanduser()
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    kept = _Snapshots()
    table, holistic = _scoring_inputs()

    async def page_html() -> str:
        snapshot = public_overview(await _overview(path, days))
        presence = await _presence(path)
        return await asyncio.to_thread(render_page, snapshot, title, presence)

    async def miner_html(uid: int) -> str:
        try:
            detail = await asyncio.wait_for(asyncio.to_thread(miner_detail, path, uid), 30)
        except StoreError as exc:
            raise HTTPException(503, f"validator store not readable yet: {exc}") from exc
        if detail is None:
            raise HTTPException(404, f"no miner with uid {uid} in this validator's store")

        def render(found: MinerDetail) -> str:
            return render_miner_page(found, explain_latest(found, table, holistic), title)

        return await asyncio.to_thread(render, detail)

    async def overview_body() -> bytes:
        snapshot = await _overview(path, days)
        return await asyncio.to_thread(lambda: json.dumps(public_json(snapshot)).encode())

    async def private_body() -> bytes:
        snapshot = await _overview(path, days)
        return await asyncio.to_thread(lambda: json.dumps(dataclasses.asdict(snapshot)).encode())

    async def proven() -> ProvenMachines:
        try:
            results = await asyncio.wait_for(asyncio.to_thread(verified_machines, path), 30)
        except StoreError as exc:
            raise HTTPException(503, f"validator store not readable yet: {exc}") from exc
        return ProvenMachines(machines=[proven_machine(r) for r in results.values()])

    @app.api_route("/", methods=READ, response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        return HTMLResponse(await kept.get("page", page_html))

    @app.api_route("/miner/{uid}", methods=READ, response_class=HTMLResponse)
    async def miner(uid: int = UrlPath(ge=0, le=65535)) -> HTMLResponse:
        return HTMLResponse(await kept.get(f"miner-{uid}", lambda: miner_html(uid)))

    @app.api_route("/api/overview", methods=READ)
    async def overview_json() -> Response:
        return Response(await kept.get("overview", overview_body), media_type="application/json")

    @app.api_route("/api/machines", methods=READ)
    async def machines(nonce: str | None = None) -> Any:
        return signed_json_response(keypair, "/api/machines", await kept.get("machines", proven), nonce)

    add_feed_routes(  # the public machine feed: /api/public/v1/machines (signed) and /machines
        app,
        path,
        validator=keypair.ss58_address if keypair is not None else None,
        respond_json=signed_bytes(keypair),
    )

    @app.api_route("/healthz", methods=READ)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    if full and keypair is not None:

        @app.get(PRIVATE_PATH, dependencies=[Depends(PrivateGate(keypair.ss58_address))])
        async def private_overview() -> Response:
            body = await kept.get("private", private_body)
            return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    return app
