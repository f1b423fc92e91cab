"""The validator's evidence surface: what renters report to and what other validators fetch.

``GET /collateral/watch`` (leases reported dead, still in their term), ``GET
/collateral/probes/{lease_id}`` (this validator's own signed probe), ``GET /collateral/evidence``
and ``/collateral/evidence/{hash}`` (signed evidence, content-addressed), ``POST
/collateral/report`` (a renter's :class:`LeaseReport`: both parties' signatures are checked before
it is kept), ``GET /healthz``. Every answer is content someone signed (the renter, the miner, this
validator): the surface needs no login and adds no trust, so any peer re-checks what it fetches.

It runs in its own thread (``serve_surface``), apart from the validator's event loop and its clock,
and touches only the book's files. Bodies are bounded; a full book answers 503.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from compute.collateral import EvidenceError
from compute.collateral.lease import LeaseReport
from compute.transport import RunningServer, serve_in_thread
from compute.validator.collateral.book import BookFull, CollateralBook

log = logging.getLogger(__name__)
MAX_REPORT_BYTES = 64 * 1024


def build_surface(book: CollateralBook, clock: Callable[[], float] = time.time) -> FastAPI:
    app = FastAPI(title="validator evidence", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/collateral/watch")
    async def watch() -> dict[str, Any]:
        return {"reports": book.raw_reports(clock())}

    @app.get("/collateral/probes/{lease_id}")
    async def probe(lease_id: str) -> JSONResponse:
        found = book.probe(lease_id)
        if found is None:
            raise HTTPException(404, "no probe of that lease")
        return JSONResponse(found.model_dump(mode="json"))

    @app.get("/collateral/evidence")
    async def evidence() -> dict[str, Any]:
        return {"evidence": book.raw_evidence()}

    @app.get("/collateral/evidence/{digest}")
    async def one(digest: str) -> JSONResponse:
        found = book.raw_evidence(digest.lower().removeprefix("0x"))
        if not found:
            raise HTTPException(404, "no evidence with that hash")
        return JSONResponse(found[0])

    @app.post("/collateral/report", status_code=202)
    async def report(request: Request) -> dict[str, Any]:
        body = await request.body()
        if len(body) > MAX_REPORT_BYTES:
            raise HTTPException(413, f"a report is at most {MAX_REPORT_BYTES} bytes")
        try:
            watched = book.add_report(LeaseReport.model_validate_json(body), clock())
        except ValidationError as error:
            raise HTTPException(400, f"not a lease report: {error.errors()[0]['msg']}") from None
        except EvidenceError as error:
            raise HTTPException(400, str(error)) from None
        except BookFull as error:
            raise HTTPException(503, str(error)) from None
        return {"accepted": True, "lease_id": watched.lease.lease_id, "term_end": watched.lease.term_end}

    return app


def serve_surface(book: CollateralBook, host: str, port: int) -> RunningServer:
    """Serve the surface in its own thread (``RunningServer.stop()`` ends it)."""
    server = serve_in_thread(build_surface(book), host, port)
    log.info("collateral evidence surface serving %s", server.url)
    return server


__all__ = ["MAX_REPORT_BYTES", "build_surface", "serve_surface"]
