"""A hostile peer on loopback, for tests and the hardening benchmark: slow bodies and idle sockets.

``Flood`` keeps ``connections`` sockets open from one source address (e.g. ``127.0.0.2``, which
is loopback on Linux, so the attacked server sees a different address than a validator on
``127.0.0.1``), each sending request headers and then a body one byte at a time (``slow-body``)
or nothing at all (``idle``); a socket the server closes is opened again at once, as an attacker
would. ``signed_latencies`` times signed calls made meanwhile.

Only ever point it at a server you started yourself on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["slow-body", "idle"]


@dataclass
class Flood:
    port: int
    source: str = "127.0.0.2"
    connections: int = 200
    mode: Mode = "slow-body"
    path: str = "/v1/health"
    drip_interval_s: float = 0.2
    opened: int = 0
    refused: int = 0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stopping: bool = False

    async def __aenter__(self) -> Flood:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self.connections)]
        await asyncio.sleep(0.5)  # let the flood build up before anyone measures
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stopping = True  # a flag as well as cancel: wait_for can swallow a cancellation
        for task in self._tasks:
            task.cancel()
        await asyncio.wait(self._tasks, timeout=5)

    async def _worker(self) -> None:
        while not self._stopping:
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", self.port, local_addr=(self.source, 0)
                )
            except OSError:
                self.refused += 1
                await asyncio.sleep(0.05)
                continue
            self.opened += 1
            try:
                await self._abuse(reader, writer)
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()
            await asyncio.sleep(0.05)

    async def _abuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "slow-body":
            writer.write(
                f"POST {self.path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: 100000\r\n\r\n".encode()
            )
        while not reader.at_eof() and not self._stopping:
            if self.mode == "slow-body":
                writer.write(b" ")
                await writer.drain()
            with contextlib.suppress(asyncio.TimeoutError):
                if await asyncio.wait_for(reader.read(4096), self.drip_interval_s) == b"":
                    return


def _flood_main(
    port: int, sources: tuple[str, ...], connections: int, mode: Mode, path: str, seconds: float
) -> None:
    from compute.transport.guard import raise_nofile_limit

    raise_nofile_limit()  # an attacker holds as many sockets as its own machine allows

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            for source in sources:
                await stack.enter_async_context(Flood(port, source, connections, mode, path))
            await asyncio.sleep(seconds)

    asyncio.run(run())


def flood_process(
    port: int,
    *,
    source: str = "127.0.0.2",
    connections: int = 200,
    mode: Mode = "slow-body",
    path: str = "/v1/health",
    seconds: float = 30.0,
    sources: tuple[str, ...] = (),
) -> mp.process.BaseProcess:
    """Run a ``Flood`` in its own process (as a real attacker would be: not sharing our CPU time).

    ``sources``: several source addresses (``connections`` from each) instead of ``source``."""
    process = mp.get_context("spawn").Process(
        target=_flood_main, args=(port, sources or (source,), connections, mode, path, seconds), daemon=True
    )
    process.start()
    return process


async def signed_latencies(
    call: Callable[[], Awaitable[object]], count: int, interval_s: float = 0.1, timeout_s: float = 5.0
) -> tuple[list[float], int]:
    """Run ``call`` ``count`` times, one after another; returns (seconds of each answered call, failures)."""
    answered: list[float] = []
    failed = 0
    for _ in range(count):
        started = time.perf_counter()
        try:
            await asyncio.wait_for(call(), timeout_s)
            answered.append(time.perf_counter() - started)
        except Exception:
            failed += 1
        await asyncio.sleep(interval_s)
    return answered, failed


def loopback_sources(count: int, first: int = 2) -> tuple[str, ...]:
    """``count`` distinct loopback source addresses, 127.0.0.``first`` on (never .0 or .255)."""
    ks = range(first - 1, first - 1 + count)
    return tuple(f"127.0.{k // 254}.{k % 254 + 1}" for k in ks)


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * len(ordered) + 0.5)) - 1)]


__all__ = ["Flood", "flood_process", "loopback_sources", "p95", "signed_latencies"]
