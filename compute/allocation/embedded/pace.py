"""A slower machine for the demo: a lease answers as a machine ``share`` as fast would.

The embedded backend runs every demo lease on the same shared CPU, so the demo's miners would all
be equally fast, and a CPU duty cycle does not help on a busy box (the scheduler lets a stopped
process catch up). Instead the backend holds each chunk of the lease's output until the time a
machine ``share`` as fast would have produced it: ``since + (arrived - since) / share``, where
``since`` is when the latest input reached the lease. A product that took ``t`` seconds answers
after ``t / share``; a stream of lines is spread alike; order is kept. Whatever the box's load,
the miner at 0.5 takes twice as long as itself at 1.0: miners of different speeds, which the
validators must rank alike. It is the miner slowing its own answers (never
a way to look faster); Docker leases are never paced.

That alone keeps the box's noise: a product slowed by twelve neighbours on two cores answers late,
and ``/ share`` makes it later still. With ``reference_gflops`` the pace is set by a fixed
reference instead: a GEMM request (``warmup`` or ``commit``, read from the lease's input) is
answered no earlier than its work at ``share`` x ``reference_gflops`` would take, so while the box
computes faster than that reference, the answer's time (and the figure a validator measures) is
the reference's, the same on every validator and at every load. A box slower
than the reference falls back to ``elapsed / share``: later, never sooner.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

GEMM_OPS = ("warmup", "commit")  # the worker's requests whose work is a product m x n x p per GPU
MAX_LINE = 1 << 20  # longer input lines are not read for their work (the worker refuses them anyway)


def reference_seconds(line: bytes, gflops: float) -> float:
    """Seconds a machine doing ``gflops`` takes for the GEMM request ``line`` (0 for anything else).

    A warm-up computes two chunks of the product at the challenge's shape (``ProverEngine.warm_up``),
    a commit all of it: 2 m n p flops per GPU."""
    if gflops <= 0 or b'"op"' not in line:
        return 0.0
    try:
        message = json.loads(line)
        if not isinstance(message, dict) or message.get("op") not in GEMM_OPS:
            return 0.0
        challenge = message["challenge"]
        m, n, p, gpus = (int(challenge[k]) for k in ("m", "n", "p", "gpu_count"))
        if message["op"] == "warmup":
            n = min(n, 2 * int(challenge["chunk"]))
    except (ValueError, TypeError, KeyError):
        return 0.0  # not a request the worker would run: nothing to pace by
    return 2.0 * m * n * p * max(1, gpus) / (gflops * 1e9)


class Pacer:
    """Release times of one lease's output at ``share`` of its speed (and, with
    ``reference_gflops``, GEMM answers at ``share`` of that reference's)."""

    def __init__(
        self, share: float, clock: Callable[[], float] | None = None, reference_gflops: float = 0.0
    ) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        if reference_gflops < 0:
            raise ValueError(f"reference_gflops must be >= 0, got {reference_gflops}")
        self.share = share
        self.reference_gflops = reference_gflops
        self._clock = clock
        self.since: float | None = None
        self.last = 0.0
        self.least_s = 0.0  # the request being answered takes at least this long (the reference)
        self._line = bytearray()

    @property
    def paces(self) -> bool:
        return self.share < 1 or self.reference_gflops > 0

    def now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def input(self, chunk: bytes = b"") -> None:
        """Input reached the lease: what it answers from now on started now (a whole GEMM request
        in it sets the least time of its answer)."""
        self.since = self.now()
        if not self.reference_gflops or not chunk:
            return
        self._line += chunk
        while (end := self._line.find(b"\n")) >= 0:
            line = bytes(self._line[:end])
            del self._line[: end + 1]
            if line.strip():
                self.least_s = reference_seconds(line, self.reference_gflops * self.share)
        if len(self._line) > MAX_LINE:
            self._line.clear()

    def release_at(self, arrived: float) -> float:
        since = arrived if self.since is None else self.since
        self.last = max(self.last, since + max((arrived - since) / self.share, self.least_s))
        return self.last


async def paced_copy(
    read: Callable[[], Awaitable[bytes]],
    write: Callable[[bytes], Awaitable[None]],
    pacer: Pacer | None,
) -> None:
    """Copy ``read`` to ``write`` until EOF, each chunk held until ``pacer`` releases it (stamped
    when it arrived, so a held chunk never delays the stamping of the next)."""
    if pacer is None or not pacer.paces:
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
