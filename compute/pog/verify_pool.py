"""Verification across cores: the recomputation of big proofs in a pool of worker processes.

A round with many miners has many GEMM proofs to verify, each mostly recomputation (``recompute``),
which needs nothing from the miner: only the validator's own challenge (key, precision, n) and its
own opening request (rows, columns). So the pool gets exactly that -- a ``RecomputeJob`` of ints and
short strings the validator made -- and sends back float64 arrays; what the miner sent (rows, Merkle
paths) never leaves this process: ``verifier.verify`` checks it here with the pool's entries
(``expected=``), in a thread. No miner bytes are ever pickled, in either direction.

Workers run at a lower priority (``nice``), so the process holding the validator's clock (event
loop, SSH sessions) keeps its core whenever it needs it; they compile the numba kernel when they
start. Small proofs (the demo, tests) are recomputed inline in a thread: a pool is started only when
a proof is big enough (``POOL_MIN_ELEMENTS``) and ``workers > 0``. A worker that dies is replaced;
its job is recomputed inline, so ``verify_async`` never raises, like ``verify``. A worker whose
validator died (kill -9 included) ends within ``PARENT_POLL_S``.

One pool per process and worker count (``shared_pool``), shut down at exit; this module does not
decide how many workers a validator wants (its settings do).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .recompute import NUMBA_MIN_ELEMENTS, expected_entries
from .verifier import Verdict, verify

log = logging.getLogger(__name__)
T = TypeVar("T")

POOL_MIN_ELEMENTS = NUMBA_MIN_ELEMENTS  # (rows + pairs) x n of one GPU below which work stays inline
WORKER_NICE = 10  # CFS weight 110 vs 1024 for the event loop's process: it gets the core back at once


@dataclass(frozen=True)
class RecomputeJob:
    """One GPU's recomputation: the validator's challenge parameters and opening request, nothing else."""

    key: str  # the challenge key (hex), the validator's secret
    precision: str
    n: int
    gpu: int
    rows: tuple[int, ...]
    cols: tuple[tuple[int, ...], ...]

    @property
    def elements(self) -> int:
        return (len(self.rows) + sum(len(c) for c in self.cols)) * self.n


def jobs_for(challenge, request) -> list[RecomputeJob]:
    """One job per GPU of the validator's ``challenge`` and ``request``."""
    return [
        RecomputeJob(
            key=challenge.key,
            precision=challenge.precision,
            n=challenge.n,
            gpu=g,
            rows=tuple(int(i) for i in request.rows[g]),
            cols=tuple(tuple(int(j) for j in c) for c in request.cols[g]),
        )
        for g in range(challenge.gpu_count)
    ]


def run_job(job: RecomputeJob) -> np.ndarray:
    """The job's exact entries (in a worker process, or inline)."""
    return expected_entries(job, job.gpu, [*job.rows], [[*c] for c in job.cols])


def _ready() -> bool:
    return True


PARENT_POLL_S = 1.0  # how often a worker checks that the validator that started it still runs


def _exit_with(parent: int, interval: float) -> None:
    """End this worker once ``parent`` is gone. A validator killed with -9 (OOM killer, pm2, a
    crash) never shuts its pool down, and a worker blocked on the job queue never sees EOF (it holds
    that pipe's write end too): each one would stay, ~250 MB, until the machine restarts, and every
    restart of the validator would leave two more."""
    while os.getppid() == parent:
        time.sleep(interval)
    os._exit(0)


def _start_worker(nice: int, parent: int = 0) -> None:  # runs in each worker process when it starts
    if parent:
        threading.Thread(target=_exit_with, args=(parent, PARENT_POLL_S), daemon=True).start()
    try:
        os.nice(nice)
    except OSError:
        pass
    from .memory.rows_kernel import element_rows
    from .verify_kernel import warm_up

    if warm_up():  # the memory rows kernel too, so no job pays a compile
        element_rows(np.zeros(1, np.uint32), 16, np.arange(4, dtype=np.uint32), "numba")


class VerifyPool:
    """A lazily started process pool for ``recompute`` jobs (``workers == 0``: always inline)."""

    def __init__(self, workers: int, nice: int = WORKER_NICE, min_elements: int = POOL_MIN_ELEMENTS) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.workers, self.nice, self.min_elements = workers, nice, min_elements
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self.jobs_pooled = 0
        self.jobs_inline = 0

    def _pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                # spawn: the validator's process has threads (SSH, executors); forking it is unsafe
                self._executor = ProcessPoolExecutor(
                    self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(self.nice, os.getpid()),
                )
                log.info("verify pool: %d worker processes (nice +%d)", self.workers, self.nice)
            return self._executor

    def pids(self) -> list[int]:
        """Worker process ids (for resource accounting); empty before the pool started."""
        executor = self._executor
        return [] if executor is None else [p.pid for p in executor._processes.values() if p.pid]

    async def expected(self, challenge, request) -> list[np.ndarray]:
        """Every GPU's exact entries; big jobs in the pool, concurrently, small ones inline."""
        return list(await asyncio.gather(*(self._one(job) for job in jobs_for(challenge, request))))

    async def _one(self, job: RecomputeJob) -> np.ndarray:
        if self.workers == 0 or job.elements < self.min_elements:
            self.jobs_inline += 1
            return await asyncio.to_thread(run_job, job)
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._pool(), run_job, job)
            self.jobs_pooled += 1
            return result
        except BrokenProcessPool:
            log.warning("verify pool: a worker died; restarting the pool, job recomputed inline")
            self._reset()
        self.jobs_inline += 1
        return await asyncio.to_thread(run_job, job)

    def _reset(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    async def call(self, fn: Callable[..., T], *args: Any, pooled: bool = True) -> T:
        """``fn(*args)`` in a worker process (``pooled`` and ``workers > 0``), else in a thread.

        ``fn`` must be a module-level function of this package; its exceptions are re-raised here.
        A worker that dies restarts the pool and the call runs in a thread instead."""
        if self.workers == 0 or not pooled:
            self.jobs_inline += 1
            return await asyncio.to_thread(fn, *args)
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._pool(), fn, *args)
            self.jobs_pooled += 1
            return result
        except BrokenProcessPool:
            log.warning("verify pool: a worker died; restarting the pool, call run in a thread")
            self._reset()
        self.jobs_inline += 1
        return await asyncio.to_thread(fn, *args)

    async def start(self) -> None:
        """Start every worker now (spawn, imports, kernel compile), before any clock runs."""
        if self.workers > 0:
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(self._pool(), _ready) for _ in range(self.workers)))

    async def verify(self, challenge, commitment, request, opening) -> Verdict:
        """``verifier.verify`` with the recomputation spread over the pool. Never raises."""
        try:
            expected = await self.expected(challenge, request)
        except Exception as exc:  # a malformed challenge/request: let verify() word the reason
            log.debug("verify pool: recomputation failed (%s); verifying inline", exc)
            return await asyncio.to_thread(verify, challenge, commitment, request, opening)
        return await asyncio.to_thread(verify, challenge, commitment, request, opening, expected)

    def close(self) -> None:
        self._reset()


_POOLS: dict[int, VerifyPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(workers: int) -> VerifyPool:
    """This process's pool with ``workers`` workers (created once, closed at exit)."""
    with _POOLS_LOCK:
        if workers not in _POOLS:
            if not _POOLS:
                atexit.register(close_pools)
            _POOLS[workers] = VerifyPool(workers)
        return _POOLS[workers]


def close_pools() -> None:
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


async def verify_async(challenge, commitment, request, opening, workers: int = 0) -> Verdict:
    """Verify off the event loop: recomputation in this process's pool of ``workers`` (0: a thread)."""
    return await shared_pool(workers).verify(challenge, commitment, request, opening)
