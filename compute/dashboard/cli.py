"""``python -m compute dashboard --store PATH``: serve a validator store's dashboard on its own.

For a validator that runs without ``--dashboard.port``, or a copy of its store file; the store is
opened read-only per request. With ``--wallet.name`` (the validator's wallet) ``/api/machines`` is
signed by its hotkey, and ``--dashboard.full`` also serves the private view to requests that hotkey
signs. Runs until Ctrl-C / SIGTERM.

``python -m compute dashboard --private URL --wallet.name V`` reads a dashboard's private view with
the validator's wallet and prints it (JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

from bittensor.sp_core import Keypair

from compute.dashboard.private import PrivateFetchError, fetch_private
from compute.dashboard.server import serve_dashboard
from compute.logs import configure_logging
from compute.transport import KeyWallet, WalletError, load_wallet

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m compute dashboard", description=__doc__)
    parser.add_argument("--store", type=Path, help="the validator store file (validator-N.db) to serve")
    parser.add_argument(
        "--private",
        metavar="URL",
        help="instead of serving: read the private view of the dashboard at URL, signed with the "
        "validator's wallet (--wallet.name), and print it as JSON",
    )
    parser.add_argument("--dashboard.host", dest="host", default="127.0.0.1", help="bind address (127.0.0.1)")
    parser.add_argument("--dashboard.port", dest="port", type=int, default=8090, help="port (default 8090)")
    parser.add_argument(
        "--dashboard.full",
        dest="full",
        action="store_true",
        help="also serve the private view (GPU UUIDs, lease endpoints, shared-device evidence) at "
        "/api/private/overview, only to requests signed by the validator's hotkey (needs --wallet.name)",
    )
    parser.add_argument(
        "--wallet.name", dest="wallet_name", help="the validator's wallet: signs /api/machines"
    )
    parser.add_argument(
        "--wallet.hotkey", dest="wallet_hotkey", default="default", help="its hotkey (default)"
    )
    parser.add_argument(
        "--wallet.path", dest="wallet_path", default="~/.bittensor/wallets", help="wallets directory"
    )
    return parser


async def _run(store: Path, host: str, port: int, full: bool, keypair: Keypair | None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    dashboard = serve_dashboard(store, host, port, stop, full=full, keypair=keypair)
    if dashboard.task is None:
        return 1
    await dashboard.task
    return 0


def _read_private(url: str, wallet: KeyWallet) -> int:
    try:
        view = asyncio.run(fetch_private(url, wallet))
    except PrivateFetchError as exc:
        print(f"dashboard: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(view, indent=2, sort_keys=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(name="dashboard")
    if (args.store is None) == (args.private is None):
        print("dashboard: give either --store PATH (serve) or --private URL (read)", file=sys.stderr)
        return 2
    if not 1 <= args.port <= 65535:
        print("--dashboard.port must be between 1 and 65535", file=sys.stderr)
        return 2
    if (args.full or args.private) and not args.wallet_name:
        print("dashboard: the private view needs the validator's wallet (--wallet.name)", file=sys.stderr)
        return 2
    keys = None
    if args.wallet_name:
        try:
            wallet = load_wallet(
                args.wallet_name, args.wallet_hotkey, str(Path(args.wallet_path).expanduser())
            )
            keys = KeyWallet.from_wallet(wallet)
        except WalletError as exc:
            print(f"dashboard: {exc}", file=sys.stderr)
            return 2
    if args.private:
        assert keys is not None
        return _read_private(args.private, keys)
    return asyncio.run(_run(args.store, args.host, args.port, args.full, keys.keypair if keys else None))
