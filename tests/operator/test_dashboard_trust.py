"""``register.py --register.dashboard URL`` believes only a validator's signed figures.

Played against the real ``register.py`` (in-process ``main`` on the real subnet of the operator
tests, and as its own process where its wall time and memory are the point) and real dashboards or
hostile HTTP servers on 127.0.0.1: an unsigned dashboard, one signed by a hotkey without a
validator permit, a man in the middle who edits the figures, a replay of an old signed answer, a
dashboard that answers one byte at a time, and one that sends 256 MiB. None may set the verified
flag; each is a clear error within the deadline, with bounded memory.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response
from operator_helpers import run_measured
from test_resources_proven import validator_key, write_store

from compute.dashboard import build_app
from compute.operator import EXIT_OK, EXIT_USAGE
from compute.transport import serve_in_thread

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(subnet, tmp_path: Path) -> Path:
    return write_store(tmp_path / "validator-27.db", subnet.miner_hotkey, subnet.miner_uid)


def _resources(subnet, url: str, *extra: str) -> tuple[int, dict]:
    return subnet.cli("operator_a", "--register.dashboard", url, *extra, "resources")


def _verified(body: dict, hotkey: str) -> bool:
    return next(m for m in body["machines"] if m["hotkey"] == hotkey)["verified"]


def test_signed_figures_of_a_validator_are_believed(subnet, store: Path, make_wallet) -> None:
    key = validator_key(subnet, make_wallet)
    server = serve_in_thread(build_app(store, keypair=key))
    try:
        code, body = _resources(subnet, server.url, "--register.dashboard_hotkey", key.ss58_address)
    finally:
        server.stop()
    assert code == EXIT_OK and _verified(body, subnet.miner_hotkey) is True


@pytest.mark.parametrize("who", ["nobody", "miner", "other validator"])
def test_figures_not_signed_by_a_trusted_validator_are_refused(subnet, store: Path, make_wallet, who) -> None:
    if who == "nobody":
        key = None
    elif who == "miner":  # a registered hotkey without a validator permit (say, the miner itself)
        key = validator_key(subnet, make_wallet, "sneaky_miner", permit=False)
    else:
        key = validator_key(subnet, make_wallet, "other_validator")
    pinned = validator_key(subnet, make_wallet, "trusted_validator").ss58_address
    server = serve_in_thread(build_app(store, keypair=key))
    try:
        extra = ("--register.dashboard_hotkey", pinned) if who == "other validator" else ()
        code, body = _resources(subnet, server.url, *extra)
    finally:
        server.stop()
    assert code == EXIT_USAGE, body
    assert "figures are not used" in body["error"]["message"]


class Middle:
    """A man in the middle: forwards to the real dashboard and edits or replays its answer."""

    def __init__(self, upstream: str, mode: str) -> None:
        self.kept: httpx.Response | None = None
        app = FastAPI()

        @app.get("/api/machines")
        async def machines(request: Request) -> Response:
            if mode == "replay" and self.kept is not None:
                answer = self.kept
            else:
                async with httpx.AsyncClient() as client:
                    answer = await client.get(f"{upstream}/api/machines", params=request.query_params)
                self.kept = answer
            body = (
                answer.content.replace(b'"tflops_fp16":250.0', b'"tflops_fp16":2500.0')
                if mode == "edit"
                else answer.content
            )
            headers = {k: v for k, v in answer.headers.items() if k.lower().startswith("x-compute")}
            return Response(body, media_type="application/json", headers=headers)

        self.server = serve_in_thread(app, "127.0.0.1", 0)


@pytest.mark.parametrize("mode", ["edit", "replay"])
def test_edited_or_replayed_figures_are_refused(subnet, store: Path, make_wallet, mode: str) -> None:
    real = serve_in_thread(build_app(store, keypair=validator_key(subnet, make_wallet)))
    middle = Middle(real.url, mode)
    try:
        if mode == "replay":
            httpx.get(f"{middle.server.url}/api/machines", params={"nonce": "an-old-request"})
        code, body = _resources(subnet, middle.server.url)
    finally:
        middle.server.stop()
        real.stop()
    assert code == EXIT_USAGE, body
    expected = "does not verify" if mode == "edit" else "signed for another request"
    assert expected in body["error"]["message"]


class Hostile:
    """A raw HTTP server on 127.0.0.1: ``drip`` sends a byte a second, ``huge`` 256 MiB of JSON."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._answer, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        ready.set()
        self.loop.run_forever()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        try:
            if self.mode == "drip":
                for byte in b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"machines":[' * 100:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(1.0)
            else:
                writer.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"machines":[')
                chunk = (
                    b'{"hotkey":"x","uid":1,"gpu_model":"H100","gpu_count":8,"verified_at":1,"round_id":1},'
                    * 1000
                )
                for _ in range((256 << 20) // len(chunk)):
                    writer.write(chunk)
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _shutdown(self) -> None:
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.loop.stop()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop)
        self.thread.join(5)


@pytest.fixture
def hostile() -> Iterator:
    made: list[Hostile] = []

    def make(mode: str) -> Hostile:
        made.append(Hostile(mode))
        return made[-1]

    yield make
    for server in made:
        server.stop()


@pytest.mark.parametrize("mode", ["drip", "huge"])
@pytest.mark.slow
def test_a_slow_or_huge_dashboard_is_cut_off_in_time_with_bounded_memory(subnet, hostile, mode: str) -> None:
    server = hostile(mode)
    argv = [sys.executable, str(REPO / "neurons" / "register.py"), *subnet.flags("operator_a")]
    argv += ["--register.timeout", "5", "--register.dashboard", server.url, "resources", "--json"]
    code, out, peak_kib, took = run_measured(argv, {**os.environ, "PYTHONPATH": str(REPO)})
    assert code == EXIT_USAGE, out
    assert ("within 5s" if mode == "drip" else "more than") in out
    assert took < 5 + 20  # the deadline holds for the whole answer (start-up of the process aside)
    assert peak_kib < 300 * 1024  # the cap holds (a 256 MiB answer took 670 MB before)
