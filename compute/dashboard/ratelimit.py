"""Per-address rate limits for the dashboard's public views (token buckets, in memory).

Each client address gets ``burst`` requests at once and ``rate_per_s`` after that; a request over
the limit is answered 429 with ``Retry-After`` before any work is done. The table of addresses is
bounded (``max_clients``; the least recently seen is forgotten first), so a flood from many
addresses costs memory in proportion to the cap, not to the flood. Behind a reverse proxy every
reader shares the proxy's address: put the limit there instead (or raise these).

Deliberately not here: authentication, or anything the view itself does.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from fastapi import HTTPException, Request


class RateLimiter:
    def __init__(
        self,
        rate_per_s: float = 0.5,
        burst: int = 20,
        max_clients: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.max_clients = max_clients
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # address -> (tokens, at)

    def wait_s(self, address: str) -> float:
        """0 when ``address`` may go on now (one token is spent), else seconds until it may."""
        now = self._clock()
        tokens, at = self._buckets.pop(address, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate_per_s)
        allowed = tokens >= 1.0
        self._buckets[address] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return 0.0 if allowed else (1.0 - tokens) / self.rate_per_s

    def __call__(self, request: Request) -> None:
        """A FastAPI dependency: 429 with ``Retry-After`` over the limit."""
        address = request.client.host if request.client is not None else "?"
        wait = self.wait_s(address)
        if wait > 0:
            raise HTTPException(
                429,
                f"rate limited: at most {self.rate_per_s:g} requests/s per address",
                {"Retry-After": str(max(1, math.ceil(wait)))},
            )


__all__ = ["RateLimiter"]
