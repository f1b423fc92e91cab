"""Entry point of ``neurons/register.py``: flags, settings, dependencies, dispatch, exit codes.

``main(argv) -> int`` parses the command line (common flags may come before or after the
subcommand), opens the wallet, lease book and miner client, runs one subcommand handler from
``compute.operator.commands`` and prints its result as JSON (``--json``) or rich tables.
Exit codes: 0 ok, 1 operation refused, 2 usage error. The only module of the package that prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError
from rich.console import Console

from compute.argv import ArgvError, Parser, alias, bounded, count, non_negative, positive
from compute.chain import ChainError, MetagraphSnapshot, connect
from compute.logs import configure_logging
from compute.operator.book import BookError, LeaseBook
from compute.operator.capture import write_json
from compute.operator.commands import HANDLERS, LEASE_HELP, Result, check_args
from compute.operator.commands_cluster import (
    add_cluster_commands,
    add_cluster_flags,
    check_cluster_args,
    cmd_allocate_cluster,
    cmd_cluster,
    cmd_deallocate_cluster,
)
from compute.operator.commands_collateral import COLLATERAL_HANDLERS, add_collateral_commands
from compute.operator.commands_shell import SHELL_HANDLERS, add_shell_commands
from compute.operator.cover import CollateralReader
from compute.operator.errors import EXIT_REFUSED, EXIT_USAGE, OperatorError, Refused, UsageError
from compute.operator.pog_records import DEFAULT_MAX_PROOF_AGE_H
from compute.operator.proof_sources import ProofSources, gather_proofs
from compute.operator.proven import DEFAULT_SIGNER_SHARE
from compute.operator.service import Operator
from compute.peertext import for_rich
from compute.settings import (
    CommonSettings,
    SettingsError,
    add_common_args,
    common_from_args,
    environment,
)
from compute.transport import MinerClient, WalletError, load_wallet

DEFAULT_DATA_DIR = "~/.compute/register"
DEFAULT_TIMEOUT_S = 15.0
_REGISTER_FLAGS = (
    "register.data_dir",
    "register.timeout",
    "register.pog_db",
    "register.dashboard",
    "register.dashboard_hotkey",
    "register.renter_evm",
    "register.validators",
    "register.signer_share",
    "collateral.rpc",
    "collateral.address",
    "validator.data_dir",
    "json",
)


def _add_register_args(parser: argparse.ArgumentParser) -> None:
    add_common_args(parser)
    group = parser.add_argument_group("register")
    group.add_argument(
        "--register.data_dir", help=f"lease book, keys, known_hosts (default {DEFAULT_DATA_DIR})"
    )
    group.add_argument(
        "--register.timeout",
        type=bounded(0.001, 600),
        help=f"seconds per miner call (default {DEFAULT_TIMEOUT_S:g})",
    )
    group.add_argument("--register.pog_db", help="validator store (file or directory) with PoG results")
    group.add_argument(
        "--validator.data_dir", help="a validator's data dir; its PoG results mark verified GPUs"
    )
    group.add_argument(
        "--register.dashboard",
        help="a validator dashboard URL (http://host:port); its proven figures, signed by a validator "
        "hotkey, mark verified GPUs",
    )
    group.add_argument(
        "--register.dashboard_hotkey",
        help="the validator hotkey (ss58) the dashboard's figures must be signed by (default: any "
        "validator holding --register.signer_share of the stake)",
    )
    group.add_argument(
        "--register.signer_share",
        type=bounded(0.000001, 1),
        help="share of the validator stake a dashboard's or feed's signer must hold, unless pinned with "
        f"--register.dashboard_hotkey; a validator permit alone is not enough (default {DEFAULT_SIGNER_SHARE:g})",
    )
    group.add_argument(
        "--register.max_proof_age",
        type=non_negative,
        help="hours: a validator's proof (store, dashboard or feed) older than this no longer marks a "
        f"machine verified nor places it in a cluster; 0: any age (default {DEFAULT_MAX_PROOF_AGE_H:g})",
    )
    group.add_argument(
        "--register.renter_evm",
        help="your EVM address (0x...), signed into each rental: a failed rental's slash is owed to it; "
        "with --collateral.rpc, a term the miner's collateral does not cover is never rented",
    )
    group.add_argument(
        "--collateral.rpc",
        help="EVM JSON-RPC URL of the collateral contract: miners' deposits and pending reclaims are read "
        "before renting (env COMPUTE_COLLATERAL_RPC)",
    )
    group.add_argument(
        "--collateral.address", help="the Collateral contract (env COMPUTE_COLLATERAL_ADDRESS)"
    )
    group.add_argument(
        "--register.validators", help="comma-separated validator evidence URLs `report` sends to"
    )
    group.add_argument("--json", action="store_true", default=None, help="print JSON instead of tables")


def _add_shared(sub: argparse.ArgumentParser, common_dests: set[str]) -> None:
    """The global flags again, after the subcommand, without overwriting values given before it."""
    _add_register_args(sub)
    for action in sub._actions:  # argparse has no public way to change defaults to SUPPRESS
        if action.dest in common_dests:
            action.default = argparse.SUPPRESS


def _add_filters(sub: argparse.ArgumentParser) -> None:
    """The machine filters, named as the SDK's ``machines()``/``allocate()`` arguments are."""
    group = sub.add_argument_group("machine requirements")
    group.add_argument("--gpu-model", help="GPU model words, e.g. H100 or 'RTX 4090'")
    group.add_argument("--gpu-count", type=count, help="at least this many GPUs")
    group.add_argument(
        "--gpu-memory-gb",
        dest="gpu_memory",
        type=non_negative,
        help="at least this much memory per GPU (GiB)",
    )
    group.add_argument("--cpu", type=count, help="at least this many CPU cores")
    group.add_argument("--ram-gb", dest="ram", type=non_negative, help="at least this much RAM (GiB)")
    group.add_argument("--disk-gb", dest="disk", type=non_negative, help="at least this much free disk (GB)")
    group.add_argument(
        "--max-price",
        type=non_negative,
        help="at most this price per hour for the machine as asked (the miner's signed price; "
        "machines without a price are left out)",
    )
    for old, dest in (("--gpu-memory", "gpu_memory"), ("--ram", "ram"), ("--disk", "disk")):
        alias(group, old, dest=dest, type=non_negative)  # the names before they matched the SDK's


def _add_feed(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--feed",
        help="a validator's public machine feed (http://host:port of its dashboard): proven figures and "
        "uptime, believed only when signed by a validator hotkey (--register.dashboard_hotkey pins one), "
        "rank the machines",
    )


def _add_lease_target(sub: argparse.ArgumentParser, optional: bool = False) -> None:
    if optional:
        sub.add_argument("lease", nargs="?", help=LEASE_HELP + "; left out with --cluster")
    else:
        sub.add_argument("lease", help=LEASE_HELP)
    sub.add_argument("--miner-hotkey", help="the miner holding the lease, if it is not in your book")
    sub.add_argument("--uid", type=count, help="the miner's uid, if the lease is not in your book")


def _add_term(sub: argparse.ArgumentParser, what: str) -> None:
    """``--ttl``/``--until`` (the SDK's ``ttl``/``until``); ``--hours``, ``--duration`` still accepted."""
    sub.add_argument("--ttl", help=what)
    sub.add_argument(
        "--until", help="the lease ends at this time: 2026-12-01T18:00[Z|+02:00], 18:30, or Unix seconds"
    )
    alias(sub, "--hours", type=positive)
    alias(sub, "--duration")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="register.py", description="Rent GPU machines from compute subnet miners.", quiet=True
    )
    _add_register_args(parser)
    dests = set(vars(parser.parse_args([])))
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def sub(name: str, help_text: str) -> argparse.ArgumentParser:
        child = subs.add_parser(name, help=help_text, description=help_text)
        _add_shared(child, dests)
        return child

    resources = sub("resources", "list rentable machines")
    _add_filters(resources)
    _add_feed(resources)
    resources.add_argument("--available-only", action="store_true", help="hide rented and offline machines")
    templates = sub("templates", "base images (templates) each miner offers")
    templates.add_argument("--hotkey", help="ask only this miner (by hotkey)")
    templates.add_argument("--uid", type=count, help="ask only this miner (by uid)")
    allocate = sub("allocate", "rent the best matching machine (or a given one)")
    _add_filters(allocate)
    _add_feed(allocate)
    allocate.add_argument(
        "--template", help="start from this template (see `templates`; default: the miner's)"
    )
    allocate.add_argument(
        "--volume",
        help="attach persistent volume NAME[:SIZE_GB] at /workspace (created on first use; kept after)",
    )
    allocate.add_argument(
        "--ports", type=bounded(0, 16, int), default=0, help="extra ports to publish (0-16)"
    )
    _add_term(
        allocate,
        "the lease's term: 90m, 2h, 3d or seconds; it ends itself after it (the miner's clock; default 1h)",
    )
    allocate.add_argument(
        "--idle-after", help="also end the lease after this long idle, as the miner measures it (>= 10m)"
    )
    allocate.add_argument("--hotkey", help="rent this miner (by hotkey) instead of choosing")
    allocate.add_argument("--uid", type=count, help="rent this miner (by uid) instead of choosing")
    allocate.add_argument("--ssh-key", help="your OpenSSH public key file (default: create a key pair)")
    add_cluster_flags(allocate)
    listing = sub("list", "my leases with the time left")
    listing.add_argument("--refresh", action="store_true", help="ask the miners for the current state")
    listing.add_argument("--all", action="store_true", help="include released and expired leases")
    listing.add_argument(
        "--all-miners",
        action="store_true",
        help="with --refresh: adopt leases of this hotkey from every serving miner, not only those of your book",
    )
    for name, text in (
        ("status", "a lease's state, from its miner"),
        ("restart", "restart a lease's machine"),
    ):
        _add_lease_target(sub(name, text))
    deallocate = sub("deallocate", "end a lease (or every lease of a cluster) now")
    _add_lease_target(deallocate, optional=True)  # the lease: left out with --cluster
    deallocate.add_argument("--cluster", help="end every lease of this cluster (id, unique prefix, or last)")
    extend = sub("extend", "add time to a lease")
    _add_lease_target(extend)
    _add_term(extend, "time to add: 90m, 2h, 3d or seconds (--until: up to that time)")
    exchange = sub("exchange-key", "replace a lease's SSH key (the old key stops working)")
    _add_lease_target(exchange)
    exchange.add_argument("--ssh-key", help="new OpenSSH public key file (default: create a key pair)")
    volumes = sub("volumes", "my persistent volumes on the miners I rented from")
    volumes.add_argument("--hotkey", help="ask only this miner (by hotkey)")
    volumes.add_argument("--uid", type=count, help="ask only this miner (by uid)")
    volume_delete = sub("volume-delete", "delete one of my volumes and its data (not while attached)")
    volume_delete.add_argument("name", help="the volume's name")
    volume_delete.add_argument("--hotkey", help="the miner holding it (default: from your book)")
    volume_delete.add_argument("--uid", type=count, help="the miner holding it, by uid")
    add_shell_commands(sub)
    add_cluster_commands(sub, lambda child: _add_shared(child, dests))
    add_collateral_commands(sub)
    interactive = sub("interactive", "a simple menu driving the same commands")
    interactive.add_argument(
        "--yes", action="store_true", help="rent without asking (the menu shows the machine and asks first)"
    )
    return parser


def metagraph_reader(chain_target: str, netuid: int) -> Callable[[], MetagraphSnapshot]:
    """A blocking function reading the subnet's metagraph once (``Refused`` when the chain fails)."""

    def read() -> MetagraphSnapshot:
        try:
            chain = connect(chain_target, netuid)
            try:
                return chain.metagraph()
            finally:
                chain.close()
        except ChainError as exc:
            raise Refused(f"cannot read the metagraph from {chain_target}: {exc}") from exc

    return read


async def _run(
    args: argparse.Namespace,
    settings: CommonSettings,
    parser: argparse.ArgumentParser,
    out: Console,
    err: Console,
) -> int:
    timeout = getattr(args, "register.timeout", None) or DEFAULT_TIMEOUT_S
    try:
        wallet = load_wallet(settings.wallet_name, settings.wallet_hotkey, str(settings.wallet_path))
        hotkey = wallet.hotkey.ss58_address
    except WalletError as exc:
        raise UsageError(str(exc)) from exc
    data_dir = Path(getattr(args, "register.data_dir", None) or DEFAULT_DATA_DIR).expanduser()
    try:
        book = LeaseBook(data_dir / "leases.db")
    except (BookError, OSError) as exc:
        raise UsageError(str(exc)) from exc
    sources = ProofSources(
        pog_db=getattr(args, "register.pog_db", None) or getattr(args, "validator.data_dir", None),
        dashboard=getattr(args, "register.dashboard", None),
        feed=getattr(args, "feed", None),
        pinned=getattr(args, "register.dashboard_hotkey", None),
        signer_share=_signer_share(args),
        max_age_h=_max_proof_age(args),
    )
    verified = await gather_proofs(sources, metagraph_reader(settings.chain_target, settings.netuid), timeout)
    _cancel_on_signals(args)
    async with MinerClient(wallet, timeout=timeout, max_concurrency=32) as client:
        op = Operator(
            hotkey=hotkey,
            client=client,
            metagraph=metagraph_reader(settings.chain_target, settings.netuid),
            book=book,
            data_dir=data_dir,
            network=settings.chain_target,
            netuid=settings.netuid,
            verified=verified,
            deadline_s=timeout * 2,
            renter_evm=_renter_evm(args),
            collateral=_collateral(args),
        )
        if args.command == "interactive":
            from compute.operator.interactive import run_menu

            return await run_menu(op, parser, out, yes=args.yes)
        args.out_stream, args.err_stream = out.file, err.file  # exec streams a command's output
        handler = (
            _cluster_handler(args)
            or HANDLERS.get(args.command)
            or SHELL_HANDLERS.get(args.command)
            or COLLATERAL_HANDLERS[args.command]
        )
        result = await handler(op, args)
        emit(out, result, bool(args.json))
        args.emitted_code = result.exit_code  # an interrupt from here on (closing the client) undoes nothing
    return result.exit_code


def _cluster_handler(args: argparse.Namespace) -> Any:
    if args.command == "allocate" and args.nodes is not None:
        return cmd_allocate_cluster
    if args.command == "deallocate" and args.cluster is not None:
        return cmd_deallocate_cluster
    return cmd_cluster if args.command == "cluster" else None


def _cancel_on_signals(args: argparse.Namespace) -> None:
    """SIGTERM and SIGHUP cancel the command as Ctrl-C does (asyncio.run's own SIGINT handler), so
    an allocate being made is finished and released rather than left running on the miner."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    if task is None:
        return

    def stop(signum: int) -> None:
        args.signal = signum
        task.cancel()

    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(signum, stop, signum)
        except (RuntimeError, ValueError, NotImplementedError):  # not the main thread: Ctrl-C only
            return


def _max_proof_age(args: argparse.Namespace) -> float:
    hours = getattr(args, "register.max_proof_age", None)
    return DEFAULT_MAX_PROOF_AGE_H if hours is None else hours


def _signer_share(args: argparse.Namespace) -> float:
    share = getattr(args, "register.signer_share", None)
    share = DEFAULT_SIGNER_SHARE if share is None else share
    if not 0 < share <= 1:
        raise UsageError(f"--register.signer_share must be in (0, 1], got {share:g}")
    return share


def _collateral(args: argparse.Namespace) -> CollateralReader | None:
    """The collateral contract to read before renting, when both flags (or their env) name it."""
    env = environment(args)
    rpc = getattr(args, "collateral.rpc", None) or env.get("COMPUTE_COLLATERAL_RPC")
    address = getattr(args, "collateral.address", None) or env.get("COMPUTE_COLLATERAL_ADDRESS")
    if not rpc and not address:
        return None
    if not rpc or not address:
        raise UsageError("the collateral contract needs both --collateral.rpc and --collateral.address")
    return CollateralReader(rpc, address)


def _renter_evm(args: argparse.Namespace) -> str | None:
    value = getattr(args, "register.renter_evm", None)
    if value is None:
        return None
    from compute.collateral import EvmKeyError, checked_h160

    try:
        return checked_h160(value)
    except EvmKeyError as exc:
        raise UsageError(f"--register.renter_evm: {exc}") from None


def emit(out: Console, result: Result, as_json: bool) -> None:
    if as_json:
        write_json(out.file, {"ok": True, **result.payload})  # a command's output streamed, not copied
    else:
        result.render(out)


def emit_error(out: Console, err: Console, error: OperatorError, as_json: bool) -> None:
    if as_json:
        body: dict[str, Any] = {"ok": False, "error": {"code": error.code, "message": error.message}}
        out.file.write(json.dumps(body, indent=2, sort_keys=True) + "\n")
    else:
        err.print(f"[bold red]error[/] ({for_rich(error.code)}): {for_rich(error.message)}", highlight=False)


def main(argv: list[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Run one register.py command; returns the exit code (0 ok, 1 refused, 2 usage)."""
    try:
        out, err = _console(stdout or sys.stdout), _console(stderr or sys.stderr)
        return _main(argv, out, err)
    except KeyboardInterrupt:  # before the command began (its consoles, its line): nothing was sent
        print("interrupted", file=stderr or sys.stderr)
        return 128 + signal.SIGINT


def _main(argv: list[str] | None, out: Console, err: Console) -> int:
    parser = build_parser()
    words = sys.argv[1:] if argv is None else argv
    try:
        args = parser.parse_args(argv)
    except ArgvError as exc:  # one line (JSON with --json), exit 2
        emit_error(out, err, UsageError(exc.line), "--json" in words)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    as_json = bool(args.json)
    try:
        check_cluster_args(args)
        check_args(args)  # bad values refused here, before a wallet, a chain or a miner is touched
        settings = common_from_args(args)
        configure_logging(settings.debug, settings.trace, settings.logging_dir, name="register")
        if not (settings.debug or settings.trace):
            logging.getLogger("compute").setLevel(logging.WARNING)
        return asyncio.run(_run(args, settings, parser, out, err))
    except SettingsError as exc:
        emit_error(out, err, UsageError(str(exc)), as_json)
        return EXIT_USAGE
    except OperatorError as exc:
        emit_error(out, err, exc, as_json)
        return exc.exit_code
    except ValidationError as exc:  # a value only the wire model refuses: still one line, exit 2
        emit_error(out, err, UsageError(_validation_line(exc)), as_json)
        return EXIT_USAGE
    except (KeyboardInterrupt, asyncio.CancelledError):
        if getattr(args, "emitted_code", None) is not None:  # the command was done and its result shown
            return int(args.emitted_code)
        if not getattr(args, "interrupt_reported", False):
            err.print("interrupted", highlight=False)
        return 128 + getattr(args, "signal", signal.SIGINT)
    except Exception as exc:  # noqa: BLE001 - the entry point: a bug is one line, its traceback in the log
        logging.getLogger(__name__).debug("register.py failed", exc_info=True)
        text = f"{type(exc).__name__}: {exc}; rerun with --logging.debug for the traceback"
        emit_error(out, err, Refused(text), as_json)
        return EXIT_REFUSED


def _console(stream: IO[str]) -> Console:
    """A console for people; piped or captured, its tables keep their natural width (no ``…``)."""
    terminal = stream.isatty() if hasattr(stream, "isatty") else False
    return Console(file=stream, soft_wrap=True, width=None if terminal else 400)


def _validation_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid value')}" if where else str(first.get("msg"))
