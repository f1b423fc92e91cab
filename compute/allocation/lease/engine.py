"""Blocking calls to one engine (a Docker daemon, local or remote), each under its own deadline.

The Docker SDK blocks, and its ``timeout`` bounds each socket read, not a call: an engine that
answers one byte at a time keeps a call going forever. ``asyncio.wait_for`` around
``asyncio.to_thread`` stops waiting but cannot free the thread, and a handful of such calls took
the whole default pool (6 threads on 2 cores) that the store, specs and every other engine need.
So each engine gets :class:`EngineCalls`: its own small pool of threads, and a deadline per call.
A call past its deadline raises :class:`EngineDeadline` at once (the backend then marks its host
down); the thread it holds stays with that engine's pool only. Calls queued behind stuck ones
count their wait against their own deadline and are dropped unstarted when it passes.

What it deliberately does not do: retry, or decide that an engine is down (the caller does).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from compute.allocation.lease.backend import BackendError

T = TypeVar("T")

DEFAULT_THREADS = 4
DEFAULT_DEADLINE_S = 30.0


class EngineDeadline(BackendError):
    """A call to the engine did not finish within its deadline (the engine is slow or silent)."""


class _DaemonPool:
    """A fixed set of daemon threads taking work from a queue. Unlike ``ThreadPoolExecutor`` (whose
    threads the interpreter joins at exit), a thread stuck on a dead engine never holds up exit."""

    def __init__(self, threads: int, name: str) -> None:
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True) for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._work.put((future, fn))
        return future

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while queued: never started
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                future.set_exception(exc)

    def shutdown(self) -> None:
        for _ in self._threads:
            self._work.put(None)


class EngineCalls:
    """``await calls.run(fn, *args, deadline_s=None)``: ``fn`` in this engine's threads, bounded."""

    def __init__(
        self, name: str, threads: int = DEFAULT_THREADS, deadline_s: float = DEFAULT_DEADLINE_S
    ) -> None:
        self.name, self.deadline_s = name, deadline_s
        self._pool = _DaemonPool(threads, f"engine-{name}")
        self._lock = threading.Lock()
        self.stuck = 0  # calls past their deadline that still hold a thread of this pool

    async def run(
        self, fn: Callable[..., T], *args: Any, deadline_s: float | None = None, **kwargs: Any
    ) -> T:
        limit = self.deadline_s if deadline_s is None else deadline_s
        future = self._pool.submit(functools.partial(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), limit)
        except asyncio.TimeoutError:
            if not future.cancel():  # already running: it keeps its thread until the engine answers
                with self._lock:
                    self.stuck += 1
                future.add_done_callback(self._unstuck)
            what = getattr(fn, "__name__", "call")
            raise EngineDeadline(f"engine {self.name}: {what} did not finish within {limit:g}s") from None
        except asyncio.CancelledError:
            future.cancel()
            raise

    def _unstuck(self, _: concurrent.futures.Future) -> None:
        with self._lock:
            self.stuck -= 1

    def close(self) -> None:
        """Stop taking calls; threads stuck on a dead engine are left to finish on their own."""
        self._pool.shutdown()


__all__ = ["DEFAULT_DEADLINE_S", "EngineCalls", "EngineDeadline"]
