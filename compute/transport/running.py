"""Running an ASGI app under uvicorn: on the current loop (the miner) or in a thread (tests).

Apps built by ``SignedServer`` carry a ``ConnectionGuard``; their uvicorn gets the guarded h11
protocol (connection caps, header deadline), the configured listen backlog, and throttled
``uvicorn.error``/``asyncio`` loggers. What it deliberately does not do: build apps.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any

import uvicorn

from .guard import ConnectionGuard, guarded_protocol, throttle_noisy_loggers

logger = logging.getLogger(__name__)


@dataclass
class RunningServer:
    """A uvicorn server running in a background thread (tests, benchmarks, local demo)."""

    url: str
    port: int
    _server: uvicorn.Server
    _thread: threading.Thread

    def request_stop(self) -> None:
        """Ask uvicorn to shut down without waiting (stop many servers in parallel)."""
        self._server.should_exit = True

    def stop(self, timeout: float = 10.0) -> None:
        self.request_stop()
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning("server %s did not stop within %.1fs", self.url, timeout)


def _config(app: Any, host: str, port: int, loop: str = "auto") -> uvicorn.Config:
    """uvicorn settings; an app carrying a ``ConnectionGuard`` (``SignedServer``) gets its protocol."""
    extra: dict[str, Any] = {}
    guard = getattr(getattr(app, "state", None), "connection_guard", None)
    if isinstance(guard, ConnectionGuard):
        extra = {"http": guarded_protocol(guard), "backlog": guard.limits.backlog}
        throttle_noisy_loggers()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=15,
        loop=loop,
        **extra,
    )


def serve_in_thread(
    app: Any, host: str = "127.0.0.1", port: int = 0, start_timeout: float = 20.0
) -> RunningServer:
    """Start uvicorn in a daemon thread and return once it accepts connections.

    ``port=0`` binds a free port first, so the reported port is the real one. The thread runs
    asyncio's own loop, as the miner's ``serve`` does, never uvloop: several servers in one process
    each run a loop, and uvloop's process spawning is process-wide (two loops spawning at once:
    "Racing with another loop to spawn a process", and the loser's retry hung; an embedded lease's
    worker never started, seen in the lockstep tests).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP (not 0): asyncio only sets TCP_NODELAY on sockets that say so, and
    # without it every response (headers, then body) waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    bound = sock.getsockname()[1]
    server = uvicorn.Server(_config(app, host, bound, loop="asyncio"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{bound}", daemon=True
    )
    thread.start()
    deadline = threading.Event()
    for _ in range(int(start_timeout / 0.01)):
        if server.started or not thread.is_alive():
            break
        deadline.wait(0.01)
    if not server.started:
        server.should_exit = True
        raise RuntimeError(f"uvicorn did not start on {host}:{bound} within {start_timeout:g}s")
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    return RunningServer(url=f"http://{shown}:{bound}", port=bound, _server=server, _thread=thread)


async def serve(
    app: Any,
    host: str,
    port: int,
    stop_event: asyncio.Event | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Run uvicorn on the current event loop until ``stop_event`` is set (or the task is cancelled).

    ``sock``: an already bound (and listening) socket to serve on, so a caller that needs a free
    port binds port 0 itself and never races another process between choosing and binding."""
    server = uvicorn.Server(_config(app, host, port))

    async def watch() -> None:
        assert stop_event is not None
        await stop_event.wait()
        server.should_exit = True

    watcher = asyncio.create_task(watch()) if stop_event is not None else None
    try:
        await server.serve(sockets=[sock] if sock is not None else None)
    finally:
        if watcher is not None:
            watcher.cancel()


__all__ = ["RunningServer", "serve", "serve_in_thread"]
