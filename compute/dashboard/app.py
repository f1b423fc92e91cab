"""The dashboard's FastAPI app: GET-only views over a validator store opened read-only.

``/`` is the HTML page, ``/api/overview`` the same snapshot as JSON, ``/api/machines`` the proven
machines (``register.py resources`` reads it), ``/healthz`` liveness. Each request opens its own
``mode=ro`` SQLite connection in a worker thread, so the validator's writer is never blocked and a
dashboard bug can never change the store.

Deliberately not here: authentication (the server binds loopback by default and shows only what
the validator already publishes as weights), writing, or serving files from disk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from compute.dashboard.models import ProvenMachines, proven_machine
from compute.dashboard.render import render_page
from compute.store import Overview, StoreError, overview, verified_machines

log = logging.getLogger(__name__)


async def _overview(store_path: Path, days: float) -> Overview:
    try:
        return await asyncio.wait_for(asyncio.to_thread(overview, store_path, days), 30)
    except StoreError as exc:
        log.warning("dashboard cannot read %s: %s", store_path, exc)
        raise HTTPException(503, f"validator store not readable yet: {exc}") from exc


def build_app(store_path: str | Path, days: float = 30.0, title: str = "Validator dashboard") -> FastAPI:
    """A read-only dashboard over the validator store at ``store_path`` (it may not exist yet)."""
    path = Path(store_path).expanduser()
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        return HTMLResponse(render_page(await _overview(path, days), title))

    @app.get("/api/overview")
    async def overview_json() -> dict[str, Any]:
        return dataclasses.asdict(await _overview(path, days))

    @app.get("/api/machines")
    async def machines() -> ProvenMachines:
        try:
            results = await asyncio.wait_for(asyncio.to_thread(verified_machines, path), 30)
        except StoreError as exc:
            raise HTTPException(503, f"validator store not readable yet: {exc}") from exc
        return ProvenMachines(machines=[proven_machine(r) for r in results.values()])

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
