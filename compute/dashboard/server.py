"""Run the dashboard on the running event loop, on a socket bound up front (in its own process).

Off when the port is 0. The socket is bound before uvicorn starts, so a taken port is one clear
log line and the validator keeps validating (the dashboard is a view, never a reason to stop
scoring). A host other than loopback is allowed but logged: the page is unauthenticated.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from pathlib import Path

import uvicorn
from bittensor.sp_core import Keypair

from compute.dashboard.app import build_app

log = logging.getLogger(__name__)


class Dashboard:
    """A running (or disabled) dashboard; ``close()`` stops it and waits, bounded."""

    def __init__(self, server: uvicorn.Server | None = None, task: asyncio.Task | None = None, url: str = ""):
        self.server = server
        self.task = task
        self.url = url

    async def listening(self, timeout: float = 30.0) -> bool:
        """True once the server accepts and answers connections; False if it stopped or did not
        start within ``timeout`` (the socket listens from ``bind`` on; this waits for uvicorn)."""
        if self.server is None or self.task is None:
            return False
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.server.started and not self.task.done():
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.01)
        return not self.task.done()

    async def close(self, timeout: float = 10.0) -> None:
        if self.server is None or self.task is None:
            return
        self.server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - shutting down: log, never raise
            log.warning("dashboard did not stop cleanly within %.0fs", timeout)
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); raises ``OSError`` when it cannot be bound.

    It listens from here on: a connection made before uvicorn serves waits in the backlog and is
    answered, never refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_dashboard(
    store_path: str | Path,
    host: str,
    port: int,
    stop: asyncio.Event | None = None,
    *,
    full: bool = False,
    keypair: Keypair | None = None,
) -> Dashboard:
    """Start serving the dashboard for ``store_path`` on the running loop (no-op when port is 0).

    The validator never calls this on its own loop: it runs it in a child process
    (:mod:`compute.dashboard.process`); ``python -m compute dashboard`` is such a process."""
    if port == 0:
        return Dashboard()
    if not _is_loopback(host):
        log.warning("dashboard on %s:%d is reachable beyond this machine and has no login", host, port)
    try:
        sock = bind(host, port)
    except OSError as exc:
        log.error("dashboard disabled: cannot bind %s:%d: %s", host, port, exc)
        return Dashboard()
    config = uvicorn.Config(
        build_app(store_path, full=full, keypair=keypair),
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="dashboard")
    if stop is not None:
        watcher = asyncio.create_task(stop.wait(), name="dashboard-stop")
        watcher.add_done_callback(lambda _: setattr(server, "should_exit", True))
        task.add_done_callback(lambda _: watcher.cancel())
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}/"
    log.info("dashboard serving %s (store %s)", url, store_path)
    return Dashboard(server, task, url)
