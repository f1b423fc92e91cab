"""How far a page flood on the dashboard moves the validator's clock (``bench dashboard --flood``).

The validator times its proofs by stamping, on its event loop, when a line leaves and when the
answer arrives. This bench plays that clock: a probe loop (this process, the "validator") times a
line round trip to an echo peer (its own process) every ``interval`` seconds, and reports the
percentiles of those round trips in three phases:

- ``baseline``: nobody asks the dashboard anything;
- ``child``: the dashboard runs as the validator runs it (``start_dashboard``: its own process,
  ``nice`` +10) and ``clients`` threads of a flood process ask for ``/`` as fast as it answers;
- ``in_loop``: the same flood on a dashboard served from the probe's own event loop (how the
  validator once served it): what the move removes.

The flood's own process runs at ``nice`` +19: on a real validator those clients are elsewhere on
the network and only the server's work lands on the validator's host. Target: the child phase's
p95 within 5 ms of the baseline's. Figures depend on the host and its load (printed with them).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

TARGET_DELTA_MS = 5.0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _echo_main(conn: Any) -> None:
    async def serve() -> None:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while line := await reader.readline():
                writer.write(line)
                await writer.drain()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        conn.send(server.sockets[0].getsockname()[1])
        await asyncio.to_thread(conn.recv)
        server.close()

    asyncio.run(serve())


def _flood_main(url: str, clients: int, seconds: float, conn: Any) -> None:
    import httpx

    os.nice(19)
    served = [0] * clients
    stop = time.monotonic() + seconds

    def client(index: int) -> None:
        with httpx.Client(timeout=10) as http:
            while time.monotonic() < stop:
                try:
                    http.get(url)
                    served[index] += 1
                except httpx.HTTPError:
                    time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    conn.send(sum(served))


async def _probe(port: int, seconds: float, interval: float) -> list[float]:
    """Round trips (ms) of one line to the echo peer, stamped on this event loop."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    times: list[float] = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.perf_counter()
        writer.write(b"ping\n")
        await reader.readline()
        times.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(interval)
    writer.close()
    return times


def _figures(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {
        "samples": len(times),
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
    }


async def _phase(
    echo_port: int, url: str | None, clients: int, seconds: float, interval: float
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    flood = None
    if url is not None:
        parent, child = ctx.Pipe()
        flood = ctx.Process(target=_flood_main, args=(url, clients, seconds + 2.0, child), daemon=True)
        flood.start()
        await asyncio.sleep(2.0)  # the flood is at full speed before the probe starts
    times = await _probe(echo_port, seconds, interval)
    result: dict[str, Any] = _figures(times)
    if flood is not None:
        result["pages_served"] = await asyncio.to_thread(parent.recv)
        await asyncio.to_thread(flood.join, 10)
    return result


async def run_flood_bench(store: Path, clients: int, seconds: float, interval: float) -> dict[str, Any]:
    """The three phases over ``store``; returns the figures (see the module docstring)."""
    from compute.dashboard.process import DashboardOptions, start_dashboard
    from compute.dashboard.server import serve_dashboard

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    echo = ctx.Process(target=_echo_main, args=(child,), daemon=True)
    echo.start()
    echo_port = parent.recv()
    try:
        result: dict[str, Any] = {"baseline": await _phase(echo_port, None, clients, seconds, interval)}
        dashboard = start_dashboard(DashboardOptions(store, "127.0.0.1", _free_port()))
        url = await dashboard.ready()
        try:
            result["child"] = await _phase(echo_port, url, clients, seconds, interval)
        finally:
            await dashboard.close()
        stop = asyncio.Event()
        in_loop = serve_dashboard(store, "127.0.0.1", _free_port(), stop)
        await asyncio.sleep(0.5)
        try:
            result["in_loop"] = await _phase(echo_port, in_loop.url, clients, seconds, interval)
        finally:
            stop.set()
            await in_loop.close()
    finally:
        parent.send("stop")
        echo.join(5)
    result["child_delta_p95_ms"] = round(result["child"]["p95_ms"] - result["baseline"]["p95_ms"], 3)
    result["in_loop_delta_p95_ms"] = round(result["in_loop"]["p95_ms"] - result["baseline"]["p95_ms"], 3)
    result["target_delta_ms"] = TARGET_DELTA_MS
    result["ok"] = result["child_delta_p95_ms"] <= TARGET_DELTA_MS
    return result


__all__ = ["TARGET_DELTA_MS", "run_flood_bench"]
