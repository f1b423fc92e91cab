"""Admission control for the signed server: per-caller token buckets and a priority semaphore.

What it does:
- ``RateLimiter``: one token bucket per authenticated hotkey (``rate`` tokens/s, ``burst`` deep),
  bounded in memory (least recently used buckets are dropped beyond ``max_callers``).
- ``PrioritySemaphore``: bounded concurrency for asyncio; when every slot is taken, waiters are
  admitted highest priority first (the server uses the caller's stake), FIFO among equals, and a
  waiter that cannot get a slot within its timeout (or finds the queue full) gets :class:`Busy`.

What it deliberately does not do: share state between processes (each worker limits on its own),
or know anything about HTTP.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


class Busy(Exception):
    """No concurrency slot could be had in time (or the wait queue is full)."""


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """Token bucket per key. ``take(key)`` returns 0.0 when admitted, else seconds to wait."""

    def __init__(
        self,
        rate: float,
        burst: float,
        max_callers: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self.max_callers = max_callers
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = _Bucket(tokens=self.burst, stamp=now)
                self._buckets[key] = bucket
                if len(self._buckets) > self.max_callers:
                    self._buckets.popitem(last=False)
            else:
                self._buckets.move_to_end(key)
                bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.rate)
                bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self.rate


def retry_after_header(wait_s: float) -> str:
    """Retry-After is whole seconds; never advertise 0 for a refusal."""
    return str(max(1, math.ceil(wait_s)))


class PrioritySemaphore:
    """An asyncio semaphore whose waiters are served by descending priority.

    Use ``async with sem.slot(priority, timeout):``. Bound to the event loop that first uses it.
    """

    def __init__(self, capacity: int, max_waiting: int = 1024) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.max_waiting = max_waiting
        self._free = capacity
        self._waiting = 0
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    @property
    def in_use(self) -> int:
        return self.capacity - self._free

    @property
    def waiting(self) -> int:
        return self._waiting

    async def acquire(self, priority: float, timeout: float) -> None:
        if self._free > 0 and self._waiting == 0:
            self._free -= 1
            return
        if self._waiting >= self.max_waiting:
            raise Busy(f"{self._waiting} requests already waiting")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (-priority, next(self._seq), future))
        self._waiting += 1
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            granted = future.done() and not future.cancelled()
            if not granted:
                future.cancel()
                if isinstance(exc, asyncio.TimeoutError):
                    raise Busy(f"no slot free within {timeout:g}s") from None
                raise
            if isinstance(exc, asyncio.CancelledError):
                self.release()  # the slot was handed to us as we were cancelled: pass it on
                raise
        finally:
            self._waiting -= 1

    def release(self) -> None:
        while self._heap:
            _, _, future = heapq.heappop(self._heap)
            if not future.done():
                future.set_result(None)  # hand the slot over directly
                return
        self._free += 1

    def slot(self, priority: float, timeout: float) -> _Slot:
        return _Slot(self, priority, timeout)


class _Slot:
    def __init__(self, sem: PrioritySemaphore, priority: float, timeout: float) -> None:
        self._sem = sem
        self._priority = priority
        self._timeout = timeout

    async def __aenter__(self) -> None:
        await self._sem.acquire(self._priority, self._timeout)

    async def __aexit__(self, *exc: object) -> None:
        self._sem.release()
