"""A userspace WAN (no ``tc netem`` here): stdin/stdout <-> TCP HOST:PORT, each direction delayed.

Run as a script (stdlib only, so it starts in tens of ms), as the validator's SSH ProxyCommand::

    --validator.lease_proxy "python3 .../latency_proxy.py --rtt-ms 150 --jitter 0.2 {host} {port}"

Every chunk read from one side is written to the other ``rtt/2 x (1 + jitter x u)`` seconds later
(``u`` uniform in [-1, 1], drawn per chunk and per direction), never before the chunk ahead of it:
a stream keeps its order, as TCP does, so jitter bunches chunks instead of reordering them.
``python -m compute localnet --latency-ms 0,150,300`` puts one in front of each validator's leases;
tests use it to play far-away miners. It measures nothing and knows nothing of SSH.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

PROXY_SCRIPT = Path(__file__).resolve()  # run it by path: stdlib only, it starts in tens of ms


class Delay:
    """Release times of one direction: each chunk one-way delay later, in order."""

    def __init__(self, one_way_s: float, jitter: float, rng: random.Random) -> None:
        self.one_way_s, self.jitter, self.rng = one_way_s, jitter, rng
        self.last = 0.0

    def release_at(self, now: float) -> float:
        delay = self.one_way_s * (1.0 + self.jitter * self.rng.uniform(-1.0, 1.0))
        self.last = max(self.last, now + max(0.0, delay))
        return self.last


async def pump(
    read: Callable[[], Awaitable[bytes]],
    write: Callable[[bytes], Awaitable[None]],
    close: Callable[[], None],
    delay: Delay,
) -> None:
    """Copy ``read`` to ``write``, each chunk released at ``delay``'s time; ``close`` at EOF."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def release() -> None:
        while True:
            at, chunk = await queue.get()
            wait = at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not chunk:
                close()
                return
            await write(chunk)

    releaser = asyncio.ensure_future(release())
    try:
        while True:
            chunk = await read()
            queue.put_nowait((delay.release_at(loop.time()), chunk))
            if not chunk:
                break
        await releaser
    except (ConnectionError, OSError):
        releaser.cancel()


async def run(host: str, port: int, rtt_s: float, jitter: float, seed: int | None) -> None:
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    remote_reader, remote_writer = await asyncio.open_connection(host, port)
    stdin = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    stdout = asyncio.StreamWriter(transport, protocol, None, loop)

    async def to_remote(chunk: bytes) -> None:
        remote_writer.write(chunk)
        await remote_writer.drain()

    async def to_local(chunk: bytes) -> None:
        stdout.write(chunk)
        await stdout.drain()

    def remote_eof() -> None:
        if remote_writer.can_write_eof():
            remote_writer.write_eof()

    half = rtt_s / 2
    await asyncio.gather(
        pump(lambda: stdin.read(1 << 16), to_remote, remote_eof, Delay(half, jitter, rng)),
        pump(lambda: remote_reader.read(1 << 16), to_local, stdout.close, Delay(half, jitter, rng)),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, required=True, help="round trip added (ms), half each way")
    parser.add_argument("--jitter", type=float, default=0.2, help="relative jitter per chunk (default 0.2)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the jitter (default: random)")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    args = parser.parse_args(argv)
    if args.rtt_ms < 0 or not 0 <= args.jitter <= 1:
        parser.error("--rtt-ms must be >= 0 and --jitter in [0, 1]")
    try:
        asyncio.run(run(args.host, args.port, args.rtt_ms / 1000.0, args.jitter, args.seed))
    except (ConnectionError, OSError) as exc:
        print(f"latency proxy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
