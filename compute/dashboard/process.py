"""The validator's dashboard in a child process, where it cannot touch the validator's clock.

Rendering a page, serialising JSON and parsing HTTP all take the CPU and, in one process, the GIL:
a page flood on a dashboard served from the validator's own event loop delays the moments the
validator stamps (its proofs are judged on its own clock). So the validator starts the dashboard
as a separate process (``spawn``: nothing of the validator's memory, keys or loop is shared), at the
lowest CPU priority (``nice`` +19), serving the store read-only. The child binds its socket itself
and tells the parent the URL once it answers requests (or why it could not bind or serve) over a
pipe, so a ready dashboard is one a reader can reach at once; it leaves when the parent
asks, and by itself when the pipe breaks (the validator died, even by ``kill -9``).

The child loads the validator's hotkey from the wallet files (to sign ``/api/machines``); the
parent passes only the wallet's name, hotkey and path.

What it deliberately does not do: restart a dashboard that died (the validator logs it and keeps
validating: the dashboard is a view, never a reason to stop scoring).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

NICE = 19  # the lowest priority: the dashboard is a view, the validator's clock comes first
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DashboardOptions:
    store: Path
    host: str
    port: int
    full: bool = False  # also GPU UUIDs, lease endpoints and shared-device evidence
    wallet: tuple[str, str, str] | None = None  # (name, hotkey, path): signs /api/machines
    nice: int = NICE
    debug: bool = False


class DashboardProcess:
    """A dashboard child process (``start_dashboard``); ``url`` once it serves."""

    def __init__(self, process: Any | None = None, conn: Connection | None = None) -> None:
        self.process, self._conn = process, conn
        self.url = ""

    async def ready(self, timeout: float = READY_TIMEOUT_S) -> str:
        """The URL once the child serves, "" when it could not (logged). Never raises."""
        if self._conn is None:
            return ""
        try:
            kind, text = await asyncio.wait_for(asyncio.to_thread(self._conn.recv), timeout)
        except (asyncio.TimeoutError, EOFError, OSError) as exc:
            log.error("dashboard process did not start: %s", exc or "timed out")
            return ""
        if kind != "ready":
            log.error("dashboard disabled: %s", text)
            return ""
        self.url = text
        return text

    async def close(self, timeout: float = 10.0) -> None:
        if self.process is None:
            return
        if self._conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self._conn.send("stop")
        await asyncio.to_thread(self.process.join, timeout)
        if self.process.is_alive():
            log.warning("dashboard process did not stop within %.0fs; terminating it", timeout)
            self.process.terminate()
            await asyncio.to_thread(self.process.join, 5)
        if self._conn is not None:
            self._conn.close()


def start_dashboard(options: DashboardOptions) -> DashboardProcess:
    """Spawn the dashboard child (no-op when the port is 0); returns at once."""
    if options.port == 0:
        return DashboardProcess()
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=child_main, args=(options, child), name="dashboard", daemon=True)
    process.start()
    child.close()
    return DashboardProcess(process, parent)


def child_main(options: DashboardOptions, conn: Connection) -> None:
    """The child: lower priority, own logging, own event loop; serves until told or orphaned."""
    from compute.logs import configure_logging

    configure_logging(options.debug, name="dashboard")
    with contextlib.suppress(OSError):
        os.nice(options.nice)
    try:
        keypair = _keypair(options.wallet)
    except Exception as exc:  # noqa: BLE001 - any wallet problem: say it to the parent, serve nothing
        conn.send(("error", f"cannot load the wallet to sign /api/machines: {exc}"))
        return
    asyncio.run(_serve(options, keypair, conn))


def _keypair(wallet: tuple[str, str, str] | None) -> Any:
    if wallet is None:
        return None
    from compute.transport import KeyWallet, load_wallet

    name, hotkey, path = wallet
    return KeyWallet.from_wallet(load_wallet(name, hotkey, path)).keypair


async def _serve(options: DashboardOptions, keypair: Any, conn: Connection) -> None:
    from compute.dashboard.server import serve_dashboard

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    dashboard = serve_dashboard(
        options.store, options.host, options.port, stop, full=options.full, keypair=keypair
    )
    if dashboard.task is None:
        conn.send(("error", f"cannot bind {options.host}:{options.port} (see the dashboard's log)"))
        return
    if not await dashboard.listening():  # ready means answering, not a task that may yet fail
        conn.send(("error", f"the dashboard on {dashboard.url} did not start serving (see its log)"))
        await dashboard.close()
        return
    conn.send(("ready", dashboard.url))

    def watch_parent() -> None:  # "stop", or EOF when the parent is gone
        with contextlib.suppress(EOFError, OSError):
            conn.recv()
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_parent, name="dashboard-parent", daemon=True).start()
    await dashboard.task


__all__ = ["DashboardOptions", "DashboardProcess", "child_main", "start_dashboard"]
