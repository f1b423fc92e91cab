"""The validator benchmark starts every time: miners serve on sockets bound before they are
handed over, so no other process can take a port between choosing and binding it."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from compute.lab.bench.validator import _listening_socket
from compute.transport import serve

REPO = Path(__file__).resolve().parents[2]


async def _app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_a_handed_over_port_cannot_be_taken_and_is_served() -> None:
    sock = _listening_socket()
    port = sock.getsockname()[1]
    with socket.socket() as thief, pytest.raises(OSError):
        thief.bind(("127.0.0.1", port))  # the race the old pick-then-bind lost

    async def run() -> str:
        stop = asyncio.Event()
        task = asyncio.create_task(serve(_app, "127.0.0.1", port, stop, sock=sock))
        async with httpx.AsyncClient() as client:
            for _ in range(100):
                try:
                    body = (await client.get(f"http://127.0.0.1:{port}/")).text
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
        stop.set()
        await task
        return body

    assert asyncio.run(run()) == "ok"


@pytest.mark.slow
def test_bench_validator_runs_verifies_every_miner_and_prints_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "compute", "bench", "validator", "--miners", "3", "--m", "16", "--n", "256"]
        + ["--p", "16", "--concurrency", "3", "--miner-timeout", "90", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["miners"] == report["verified"] == 3 and report["failures"] == []
