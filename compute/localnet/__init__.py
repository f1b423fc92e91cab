"""`python -m compute localnet`: the whole subnet on this machine, in one command.

Starts a simulated chain, creates wallets, registers K validators (``--validators``, each with its
own stake) and N miners, runs the miners (embedded SSH backend by default, Docker with
``--backend docker``) and the validators as separate processes, lets every validator run R
Proof-of-GPU rounds on this CPU, prints the scoreboard, the weights written on the simulated chain
and the validators' agreement under Yuma consensus, and stops everything.

Ctrl-C, SIGTERM and SIGHUP (pm2, systemd, a closed terminal) stop every child at any moment,
``--hold`` included: each runs in its own process group, signalled as a whole
(``compute.localnet.processes``).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

from bittensor.sp_core import Keypair
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from compute.dashboard import build_app
from compute.transport import serve_in_thread

from .collateral import CollateralDemo, collateral_problems, render_collateral, run_story
from .consensus import collect_consensus, consensus_problems, render_consensus
from .images import choose_lease_image
from .network import LocalNet, LocalnetError, Options
from .processes import free_port, signal_number, stop_on_signals
from .report import collect_summary, render_summary, summary_problems

__all__ = ["LocalNet", "LocalnetError", "Options", "main"]

log = logging.getLogger("compute.localnet")
REPO_ROOT = Path(__file__).resolve().parents[2]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m compute localnet", description=__doc__)
    parser.add_argument("--miners", type=int, default=3, help="number of miners (default 3)")
    parser.add_argument("--rounds", type=int, default=1, help="validator rounds to run (default 1)")
    parser.add_argument(
        "--validators",
        type=int,
        default=None,
        help="validators, each with its own stake (default 1; 3 with --collateral)",
    )
    parser.add_argument(
        "--backend",
        choices=["embedded", "docker"],
        default="embedded",
        help="miners' rental backend (default embedded)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(".localnet"),
        help="where chain, wallets, state and logs go (default .localnet)",
    )
    parser.add_argument("--block-time", type=float, default=1.0, help="simulated block time, s")
    parser.add_argument("--pog-m", type=int, default=512, help="PoG output rows per challenge")
    parser.add_argument("--pog-n", type=int, default=8192, help="PoG inner dimension")
    parser.add_argument("--pog-p", type=int, default=512, help="PoG output columns")
    parser.add_argument(
        "--timeout", type=float, default=None, help="give up after this many s (default 170 per validator)"
    )
    parser.add_argument(
        "--base-image",
        default="auto",
        help="lease image of --backend docker miners (default auto: compute-base:cuda where the engine "
        "has the nvidia runtime, else the CPU test image compute-base:cpu)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    parser.add_argument(
        "--hosts",
        type=int,
        choices=[1, 2],
        default=1,
        help="2: the first miner rents out two Docker hosts, this engine and a second dockerd in a "
        "network namespace over TLS (needs --backend docker and root; default 1)",
    )
    parser.add_argument(
        "--cheaters",
        action="store_true",
        help="add cheating miners: one refusing every rental while claiming rented, two hotkeys sharing "
        "one box, a canary-aware miner refusing real renters and a self-renter on its own coldkey",
    )
    parser.add_argument(
        "--collateral",
        action="store_true",
        help="a local EVM with the collateral contract, deposits, a miner killing a renter's lease, "
        "the validators' quorum slash and the renter's claim (fails if the renter is not compensated)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="two hosts in network namespaces joined by a virtual link (root): the validator proves the "
        "link, a renter rents both as a cluster and runs a gloo all-reduce training step across it",
    )
    parser.add_argument(
        "--speeds",
        default="",
        help="comma-separated speed of each miner (share of full speed), e.g. 1,0.5 (cycled; default: from 1.0 "
        "down to 0.4, so the miners differ in speed); 1 = all at full speed",
    )
    parser.add_argument(
        "--latency-ms",
        default="",
        help="comma-separated round trip (ms) added between each validator and the leases, e.g. "
        "0,150,300 (cycled; +/-20%% jitter per chunk and direction through a userspace proxy)",
    )
    parser.add_argument(
        "--logging.debug", dest="debug", action="store_true", help="debug logs from every process"
    )
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="serve the validator dashboard on 127.0.0.1 and print its URL",
    )
    parser.add_argument(
        "--dashboard-port", type=int, default=0, help="dashboard port with --dashboard (default: a free one)"
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=0.0,
        help="after the rounds, keep the chain and miners (and the dashboard) serving renters for this "
        "many s (-1: until Ctrl-C), printing the register.py flags and SDK settings to rent from them",
    )
    parser.add_argument(
        "--dashboard-hold",
        type=float,
        default=-1.0,
        help="with --dashboard, keep serving it this many s after the rounds (default: until Ctrl-C)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not 1 <= args.miners <= 64:
        print("--miners must be between 1 and 64", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print("--rounds must be at least 1", file=sys.stderr)
        return 2
    if args.validators is None:
        args.validators = 3 if args.collateral else 1
    if args.collateral and args.validators < 2:
        print(
            "--collateral needs at least 2 validators (a slash needs several validators' probes)",
            file=sys.stderr,
        )
        return 2
    if not 1 <= args.validators <= 16:
        print("--validators must be between 1 and 16", file=sys.stderr)
        return 2
    try:
        speeds = _numbers(args.speeds, "--speeds", low=0.01, high=1.0)
        latency = _numbers(args.latency_ms, "--latency-ms", low=0.0, high=5000.0)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    if args.cluster:
        from .cluster_demo import run_cluster_demo

        return run_cluster_demo(args, REPO_ROOT, console)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    options = Options(
        miners=args.miners,
        rounds=args.rounds,
        backend=args.backend,
        workdir=args.workdir,
        block_time=args.block_time,
        pog_m=args.pog_m,
        pog_n=args.pog_n,
        pog_p=args.pog_p,
        timeout_s=args.timeout if args.timeout is not None else 170.0 * args.validators,
        debug=args.debug,
        cheaters=args.cheaters,
        dashboard_port=(args.dashboard_port or free_port()) if args.dashboard else 0,
        validators=args.validators,
        hosts=args.hosts,
        collateral=args.collateral,
        speeds=speeds,
        latency_ms=latency,
    )
    if args.hosts > 1 and args.backend != "docker":
        print("--hosts 2 needs --backend docker", file=sys.stderr)
        return 2

    if args.backend == "docker":
        try:
            options = replace(options, base_image=choose_lease_image(args.base_image))
        except LocalnetError as exc:
            console.print(f"[red]localnet failed:[/red] {escape(str(exc))}")
            return 1

    def show(name: str, line: str) -> None:
        console.print(Text.assemble((f"[{name}] ", "dim"), line), highlight=False, soft_wrap=True)

    stop_on_signals()
    net = LocalNet(options, REPO_ROOT, on_line=show)
    demo = CollateralDemo(net) if options.collateral else None
    started = time.monotonic()
    try:
        net.create()
        if options.hosts > 1:
            net.start_second_host()
        if options.dashboard_port:
            console.print(f"dashboard: http://127.0.0.1:{options.dashboard_port}/")
        if demo is not None:
            demo.setup()
            run_story(net, demo, options.rounds, deadline=started + options.timeout_s)
        else:
            net.wait_for_miners(net.start_miners())
            net.run_validators(deadline=started + options.timeout_s)
        summary = collect_summary(net)
        summary["consensus"] = collect_consensus(net)
        if demo is not None:
            summary["collateral"] = demo.summary()
        if args.hold:
            held = finish(summary, started, options, args)
            hold_for_renters(net, args.hold, console)
    except LocalnetError as exc:
        console.print(f"[red]localnet failed:[/red] {escape(str(exc))}")
        return 1
    except KeyboardInterrupt as interrupt:
        signum = signal_number(interrupt)
        console.print(f"[yellow]{signal.Signals(signum).name}: stopping[/yellow]")
        return 128 + signum
    finally:
        net.stop()
        if demo is not None:
            demo.stop()
    if args.hold:
        return 1 if held else 0
    problems = finish(summary, started, options, args)
    if options.dashboard_port:
        signer = net.validator.wallet.hotkey if net.validator is not None else None
        hold_dashboard(net.store_path, options.dashboard_port, args.dashboard_hold, console, signer)
    return 1 if problems else 0


def finish(summary: dict, started: float, options: Options, args: argparse.Namespace) -> list[str]:
    """Judge and print the demo's summary (JSON or tables); returns its problems."""
    summary["elapsed_s"] = round(time.monotonic() - started, 1)
    problems = summary_problems(summary, options.rounds) + consensus_problems(summary["consensus"])
    problems += collateral_problems(summary)
    summary["ok"], summary["problems"] = not problems, problems
    if args.json:
        print(json.dumps(summary, indent=2), flush=True)
    else:
        out = Console(width=None if sys.stdout.isatty() else 160)
        render_summary(summary, out)
        render_consensus(summary["consensus"], out)
        render_collateral(summary.get("collateral"), out)
    return problems


def renter_command(flags: str, feed_url: str) -> str:
    """The register.py line a renter copies: the demo's chain and wallet, and its validator's
    signed feed (without it every machine shows unverified)."""
    return f"python3 neurons/register.py {flags} resources --feed {feed_url}"


def hold_for_renters(net: LocalNet, hold_s: float, console: Console) -> None:
    """Keep the miners and the validator's dashboard (its signed machine feed) up for renters;
    print how to reach them."""
    validator = net.validator
    assert validator is not None
    wallets, chain = net.wallet_root, net.chain_path
    flags = f"--subtensor.network sim:{chain} --wallet.path {wallets} --wallet.name {validator.name}"
    app = build_app(net.store_path, keypair=validator.wallet.hotkey)  # signs /api/machines and the feed
    server = serve_in_thread(app, "127.0.0.1", net.options.dashboard_port or free_port())
    console.print(f"renters: {renter_command(flags, server.url)}", highlight=False, soft_wrap=True)
    console.print(
        f"renters (SDK, docs/sdk.md): BT_NETWORK=sim:{chain} BT_WALLET_PATH={wallets} BT_WALLET={validator.name}",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"dashboard still serving {server.url}/", highlight=False)
    until = "Ctrl-C or SIGTERM" if hold_s < 0 else f"{hold_s:g}s"
    console.print(f"holding for renters (until {until})", highlight=False)
    try:
        time.sleep(hold_s if hold_s > 0 else 10**9)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _numbers(text: str, flag: str, low: float, high: float) -> tuple[float, ...]:
    """A comma-separated list of numbers in [low, high] (empty: none)."""
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated numbers, got {text!r}") from None
    if any(not low <= v <= high for v in values):
        raise ValueError(f"{flag}: every value must be between {low:g} and {high:g}")
    return values


def hold_dashboard(
    store_path: Path, port: int, hold_s: float, console: Console, keypair: Keypair | None = None
) -> None:
    """Keep the dashboard up on the finished demo's store (the validator has exited); ``keypair``:
    the demo validator's hotkey, which signs the dashboard's figures as the validator did."""
    if hold_s == 0:
        return
    server = serve_in_thread(build_app(store_path, keypair=keypair), "127.0.0.1", port)
    until = "Ctrl-C" if hold_s < 0 else f"{hold_s:g}s"
    console.print(f"dashboard still serving {server.url}/ (until {until})")
    try:
        time.sleep(hold_s if hold_s > 0 else 10**9)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
