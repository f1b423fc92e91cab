"""``localnet/latency_proxy.py`` whose way back rises by ``--rise-s`` during a stretch of the session.

Run by path as a lease's SSH ProxyCommand (``bench distance --far-e2e``; a script, not a benchmark)::

    rise_proxy.py --rtt-ms 150 --jitter 0.2 --rise-s 1.0 --rise-at-s 4 --rise-for-s 30 {host} {port}

The round trip and its jitter are the latency proxy's own (its ``run``, ``pump`` and ``Delay``); the
miner -> validator direction adds ``--rise-s`` to every chunk read between ``--rise-at-s`` and
``--rise-at-s + --rise-for-s`` seconds after the connection opened (the path's delay varying after
the validator measured its round trip). ``--trace`` appends one JSON line per chunk (time since the
start, direction, bytes, delay) to a file. Lab only: nothing in the validator or miner imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # run by path: the repository's ``compute``

from compute.localnet import latency_proxy  # noqa: E402


def rising(rise_s: float, at_s: float, for_s: float, trace: Path | None) -> type[latency_proxy.Delay]:
    """A ``Delay`` whose second instance (``run`` makes the way back second) adds ``rise_s``."""
    opened = time.monotonic()
    made: list[object] = []

    class Rising(latency_proxy.Delay):
        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            made.append(self)
            self.back = len(made) == 2

        def release_at(self, now: float) -> float:
            """The latency proxy's release (in order, jittered), plus the rise on the way back."""
            since = time.monotonic() - opened
            extra = rise_s if self.back and at_s <= since < at_s + for_s else 0.0
            delay = self.one_way_s * (1.0 + self.jitter * self.rng.uniform(-1.0, 1.0)) + extra
            self.last = max(self.last, now + max(0.0, delay))
            if trace is not None:
                with trace.open("a") as out:
                    line = {"t": round(since, 4), "at": time.monotonic(), "back": self.back, "rise": extra}
                    out.write(json.dumps(line) + "\n")
            return self.last

    return Rising


def run_proxy(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compute bench rise-proxy", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rtt-ms", type=float, required=True, help="round trip added, in ms")
    parser.add_argument("--jitter", type=float, default=0.2, help="relative jitter per chunk (default 0.2)")
    parser.add_argument("--rise-s", type=float, default=1.0, help="added to the way back (s)")
    parser.add_argument("--rise-at-s", type=float, default=0.0, help="from this long after the connection")
    parser.add_argument("--rise-for-s", type=float, default=float("inf"), help="for this long")
    parser.add_argument(
        "--trace", type=Path, default=None, help="append one JSON line per chunk to this file"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the jitter")
    parser.add_argument("host", help="host to connect to")
    parser.add_argument("port", type=int, help="TCP port to connect to")
    args = parser.parse_args(argv)
    latency_proxy.Delay = rising(args.rise_s, args.rise_at_s, args.rise_for_s, args.trace)  # type: ignore[misc]
    try:
        asyncio.run(latency_proxy.run(args.host, args.port, args.rtt_ms / 1000.0, args.jitter, args.seed))
    except (ConnectionError, OSError) as exc:
        print(f"rise proxy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_proxy())
