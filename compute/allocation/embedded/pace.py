"""A slower machine for the demo: a lease answers as a machine ``share`` as fast would.

The embedded backend runs every demo lease on the same shared CPU, so the demo's miners would all
be equally fast, and a CPU duty cycle does not help on a busy box (the scheduler lets a stopped
process catch up). Instead the backend holds each chunk of the lease's output until the time a
machine ``share`` as fast would have produced it: ``since + (arrived - since) / share``, where
``since`` is when the latest input reached the lease. A product that took ``t`` seconds answers
after ``t / share``; a stream of lines is spread alike; order is kept. Whatever the box's load,
the miner at 0.5 takes twice as long as itself at 1.0: miners of different speeds, which the
validators must rank alike (issue 24, finding 5). It is the miner slowing its own answers (never
a way to look faster); Docker leases are never paced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class Pacer:
    """Release times of one lease's output at ``share`` of its speed."""

    def __init__(self, share: float, clock: Callable[[], float] | None = None) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        self.share = share
        self._clock = clock
        self.since: float | None = None
        self.last = 0.0

    def now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def input(self) -> None:
        """Input reached the lease: what it answers from now on started now."""
        self.since = self.now()

    def release_at(self, arrived: float) -> float:
        since = arrived if self.since is None else self.since
        self.last = max(self.last, since + (arrived - since) / self.share)
        return self.last


async def paced_copy(
    read: Callable[[], Awaitable[bytes]],
    write: Callable[[bytes], Awaitable[None]],
    pacer: Pacer | None,
) -> None:
    """Copy ``read`` to ``write`` until EOF, each chunk held until ``pacer`` releases it (stamped
    when it arrived, so a held chunk never delays the stamping of the next)."""
    if pacer is None or pacer.share >= 1:
        while chunk := await read():
            await write(chunk)
        return
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def release() -> None:
        while True:
            at, chunk = await queue.get()
            if not chunk:
                return
            wait = at - pacer.now()
            if wait > 0:
                await asyncio.sleep(wait)
            await write(chunk)

    releaser = asyncio.ensure_future(release())
    try:
        while True:
            chunk = await read()
            queue.put_nowait((pacer.release_at(pacer.now()), chunk))
            if not chunk:
                break
        await releaser
    finally:
        releaser.cancel()
