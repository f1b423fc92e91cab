"""``python -m compute chain ...``: create and inspect a simulated chain file.

Subcommands: ``create`` (new chain file with one subnet), ``register`` (a hotkey,
by SS58 address or from a wallet), ``show`` (the neurons as a table or JSON) and
``weights`` (the weight rows). It reads the chain file directly; it never talks
to a live network (use ``btcli`` for that).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from .sim import NeuronRow, SimChainError, SimChainState
from .sim.state import RAO_PER_TAO

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m compute chain", description="Simulated chain (SQLite file)."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    create = sub.add_parser("create", help="create a chain file with one subnet")
    create.add_argument("path")
    create.add_argument("--netuid", type=int, default=27)
    create.add_argument("--block-time", type=float, default=1.0, help="seconds per block (default 1)")
    create.add_argument("--tempo", type=int, default=360)
    create.add_argument("--weights-rate-limit", type=int, default=100, help="blocks between weight sets")
    create.add_argument("--min-allowed-weights", type=int, default=1)
    create.add_argument(
        "--max-weights-limit", type=int, default=65535, help="u16 fraction (65535 = no limit)"
    )
    create.add_argument("--force", action="store_true", help="replace an existing file")

    register = sub.add_parser("register", help="register a hotkey (idempotent)")
    register.add_argument("path")
    register.add_argument("--netuid", type=int, default=None, help="default: the chain's first subnet")
    register.add_argument("--hotkey", help="hotkey SS58 address")
    register.add_argument("--coldkey", help="coldkey SS58 address")
    register.add_argument("--wallet.name", dest="wallet_name", help="take both keys from this wallet")
    register.add_argument("--wallet.hotkey", dest="wallet_hotkey", default="default")
    register.add_argument("--wallet.path", dest="wallet_path", default="~/.bittensor/wallets")
    register.add_argument("--stake", type=float, default=1000.0, help="stake in TAO (default 1000)")
    register.add_argument("--validator-permit", action="store_true")

    for name, text in (("show", "list neurons"), ("weights", "list weight rows")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("path")
        cmd.add_argument("--netuid", type=int, default=None)
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console(soft_wrap=True)
    try:
        if args.command == "create":
            return _create(args, console)
        state = SimChainState.open(args.path)
        netuid = state.default_netuid if args.netuid is None else args.netuid
        if args.command == "register":
            return _register(args, state, netuid, console)
        if state.subnet(netuid) is None:
            raise SimChainError(f"subnet {netuid} does not exist in {args.path}")
        if args.command == "show":
            return _show(args, state, netuid, console)
        return _weights(args, state, netuid, console)
    except (SimChainError, ValueError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 1


def _create(args: argparse.Namespace, console: Console) -> int:
    state = SimChainState.create(
        args.path,
        netuid=args.netuid,
        block_time=args.block_time,
        tempo=args.tempo,
        weights_rate_limit=args.weights_rate_limit,
        min_allowed_weights=args.min_allowed_weights,
        max_weights_limit=args.max_weights_limit,
        overwrite=args.force,
    )
    console.print(
        f"created {state.path} netuid={args.netuid} block_time={args.block_time}s "
        f"tempo={args.tempo} weights_rate_limit={args.weights_rate_limit}"
    )
    return 0


def _register(args: argparse.Namespace, state: SimChainState, netuid: int, console: Console) -> int:
    if args.wallet_name:
        if args.hotkey or args.coldkey:
            raise ValueError("give either --hotkey/--coldkey or --wallet.name, not both")
        hotkey, coldkey = _wallet_keys(args.wallet_name, args.wallet_hotkey, args.wallet_path)
    elif args.hotkey and args.coldkey:
        hotkey, coldkey = _ss58(args.hotkey, "--hotkey"), _ss58(args.coldkey, "--coldkey")
    else:
        raise ValueError("give --hotkey and --coldkey, or --wallet.name [--wallet.hotkey --wallet.path]")
    uid = state.register(hotkey, coldkey, args.stake, args.validator_permit, netuid=netuid)
    console.print(
        f"registered uid={uid} netuid={netuid} hotkey={hotkey} stake={args.stake:g} "
        f"permit={args.validator_permit}"
    )
    return 0


def _ss58(value: str, flag: str) -> str:
    from bittensor.sp_core import ss58_decode

    try:
        ss58_decode(value)
    except ValueError as error:
        raise ValueError(f"{flag} {value!r} is not an SS58 address: {error}") from None
    return value


def _wallet_keys(name: str, hotkey_name: str, path: str) -> tuple[str, str]:
    import bittensor as bt

    wallet = bt.Wallet(name=name, hotkey=hotkey_name, path=path)
    try:
        return wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address
    except Exception as error:  # the SDK raises several key-file errors; all mean "cannot load"
        raise ValueError(f"cannot load wallet {name}/{hotkey_name} under {path}: {error}") from error


def _axon(neuron: NeuronRow) -> str | None:
    if not neuron.axon_ip:
        return None
    address = (
        ipaddress.ip_address(neuron.axon_ip)
        if neuron.axon_ip_type == 4
        else ipaddress.IPv6Address(neuron.axon_ip)
    )
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"{host}:{neuron.axon_port}"


def _neuron_dict(neuron: NeuronRow, weights: dict[int, list[tuple[int, int]]]) -> dict[str, Any]:
    return {
        "uid": neuron.uid,
        "hotkey": neuron.hotkey,
        "coldkey": neuron.coldkey,
        "stake": neuron.stake_rao / RAO_PER_TAO,
        "validator_permit": neuron.validator_permit,
        "axon": _axon(neuron),
        "last_update": neuron.last_update,
        "weights_set": len(weights.get(neuron.uid, [])),
    }


def _show(args: argparse.Namespace, state: SimChainState, netuid: int, console: Console) -> int:
    subnet = state.subnet(netuid)
    if subnet is None:  # main() checked already; kept for a direct call
        raise SimChainError(f"subnet {netuid} does not exist in {state.path}")
    weights = state.weights(netuid)
    rows = [_neuron_dict(n, weights) for n in state.neurons(netuid)]
    header = {
        "path": str(state.path),
        "netuid": netuid,
        "block": state.block(),
        "block_time": state.block_time,
        "tempo": subnet.tempo,
        "weights_rate_limit": subnet.weights_rate_limit,
        "commit_reveal": subnet.commit_reveal,
    }
    if args.json:
        sys.stdout.write(json.dumps({**header, "neurons": rows}, indent=2) + "\n")
        return 0
    table = Table(title=" ".join(f"{k}={v}" for k, v in header.items()))
    for column in ("uid", "hotkey", "coldkey", "stake", "permit", "axon", "last_update", "weights set"):
        table.add_column(column, justify="right" if column in ("uid", "stake", "last_update") else "left")
    for row in rows:
        table.add_row(
            str(row["uid"]),
            row["hotkey"],
            row["coldkey"],
            f"{row['stake']:,.2f}",
            "yes" if row["validator_permit"] else "",
            row["axon"] or "-",
            str(row["last_update"]),
            str(row["weights_set"]) if row["weights_set"] else "-",
        )
    # Full SS58 addresses need ~170 columns; let a narrow terminal wrap rather than elide them.
    Console(width=max(console.width, 170)).print(table)
    return 0


def _weights(args: argparse.Namespace, state: SimChainState, netuid: int, console: Console) -> int:
    rows = state.weights(netuid)
    normalised = {
        uid: {dest: value / total for dest, value in row}
        for uid, row in rows.items()
        if (total := sum(value for _, value in row))
    }
    if args.json:
        sys.stdout.write(
            json.dumps({str(u): {str(d): w for d, w in r.items()} for u, r in normalised.items()}) + "\n"
        )
        return 0
    table = Table(title=f"weights netuid={netuid} block={state.block()}")
    table.add_column("uid", justify="right")
    table.add_column("weights (dest: fraction)")
    for uid, row in normalised.items():
        table.add_row(str(uid), "  ".join(f"{dest}: {w:.4f}" for dest, w in row.items()))
    if not normalised:
        console.print(f"no weights set on netuid {netuid}")
        return 0
    console.print(table)
    return 0
