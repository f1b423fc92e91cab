"""Several servers in one process (``serve_in_thread``: the tests' miners, the benchmarks) spawn
subprocesses at the same moments, as embedded miners do when the validator opens their leases."""

from __future__ import annotations

import asyncio
import sys

import httpx
import pytest
from fastapi import FastAPI

from compute.transport.running import serve_in_thread


def spawning_app() -> FastAPI:
    app = FastAPI()

    @app.get("/spawn")
    async def spawn() -> dict[str, int]:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
        return {"rc": await proc.wait()}

    return app


@pytest.mark.slow
async def test_servers_in_threads_spawn_processes_at_once() -> None:
    """Under uvloop (uvicorn's default loop) the second of two loops spawning at once failed with
    "Racing with another loop to spawn a process" and its lease's worker never started."""
    servers = [serve_in_thread(spawning_app()) for _ in range(4)]
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            for _ in range(3):
                replies = await asyncio.gather(
                    *(client.get(f"{server.url}/spawn") for server in servers for _ in range(3))
                )
                assert [r.status_code for r in replies] == [200] * len(replies)
                assert all(r.json() == {"rc": 0} for r in replies)
    finally:
        for server in servers:
            server.request_stop()
        for server in servers:
            server.stop()
