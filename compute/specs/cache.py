"""A thread-safe, time-bounded cache of ``collect_specs()`` (specs requests must be cheap).

What it does: the first ``get()`` collects; later calls within ``ttl_s`` return the same object;
concurrent callers during a refresh wait for one collection instead of each running their own.
What it does not do: refresh in the background (the miner calls ``get()`` from a thread via
``asyncio.to_thread``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from compute.specs.collect import HostSpecs, collect_specs


class SpecsCache:
    def __init__(
        self,
        ttl_s: float = 300.0,
        collector: Callable[[], HostSpecs] = collect_specs,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not ttl_s >= 0:
            raise ValueError(f"ttl_s must be >= 0, got {ttl_s!r}")
        self._ttl_s = ttl_s
        self._collector = collector
        self._clock = clock
        self._lock = threading.Lock()
        self._value: HostSpecs | None = None
        self._at = 0.0

    def get(self) -> HostSpecs:
        """Cached specs, collected afresh when older than ``ttl_s``."""
        with self._lock:
            if self._value is None or self._clock() - self._at >= self._ttl_s:
                self._value = self._collector()
                self._at = self._clock()
            return self._value

    def invalidate(self) -> None:
        """Force the next ``get()`` to collect (e.g. after a GPU was added)."""
        with self._lock:
            self._value = None
