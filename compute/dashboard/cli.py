"""``python -m compute dashboard --store PATH``: serve a validator store's dashboard on its own.

For a validator that runs without ``--dashboard.port``, or a copy of its store file; the store is
opened read-only per request. Runs until Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from compute.dashboard.server import serve_dashboard

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m compute dashboard", description=__doc__)
    parser.add_argument("--store", type=Path, required=True, help="the validator store file (validator-N.db)")
    parser.add_argument("--dashboard.host", dest="host", default="127.0.0.1", help="bind address (127.0.0.1)")
    parser.add_argument("--dashboard.port", dest="port", type=int, default=8090, help="port (default 8090)")
    return parser


async def _run(store: Path, host: str, port: int) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    dashboard = serve_dashboard(store, host, port, stop)
    if dashboard.task is None:
        return 1
    await dashboard.task
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if not 1 <= args.port <= 65535:
        print("--dashboard.port must be between 1 and 65535", file=sys.stderr)
        return 2
    return asyncio.run(_run(args.store, args.host, args.port))
