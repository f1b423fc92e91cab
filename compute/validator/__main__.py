"""``python -m compute.validator agreement-sim``: agreement vs noise and design, and validation load.

Also ``check-cost`` (one test's GEMM proofs timed with the shipped worker), ``canary-sim``
(``tools.canary_sim``: what a renter-refusing miner keeps, and what canaries cost), ``fleet-bench``
(``tools.fleet``: one real round against a simulated subnet of multi-GPU miners) and ``presence-sim``
(``tools.presence_sim``: one device behind 1-32 hotkeys, hit and run, the load).

Prints two tables (``--json``: one object): how well honest validators agree (pairwise weight
cosine, Yuma validator trust) under modelled measurement noise for each design choice, and the
share of a miner's GPU time spent on validation for 1, 16 and 64 validators at the default round
interval, without and with the load budget. Both are documented in docs/consensus.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from compute.validator.round.timing import DEFAULT_BLOCK_SECONDS
from compute.validator.tools import fleet
from compute.validator.tools.agreement import (
    agreement_table,
    credit_sensitivity,
    load_table,
    noise_legend,
)


def _defaults() -> dict[str, Any]:
    from compute.validator.settings import ValidatorSettings

    fields = ValidatorSettings.model_fields
    return {name: fields[name].default for name in fields if name != "common"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m compute.validator", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("agreement-sim", help="agreement vs noise and design; validation load")
    sim.add_argument("--validators", type=int, default=16, help="validators simulated (default 16)")
    sim.add_argument("--miners", type=int, default=32, help="miners simulated (default 32)")
    sim.add_argument("--rounds", type=int, default=20, help="rounds simulated (default 20)")
    sim.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sim.add_argument("--json", action="store_true", help="one JSON object on stdout")
    cost = sub.add_parser("check-cost", help="time one test's GEMM proofs with the shipped worker")
    cost.add_argument("--gpu", default="H100 SXM", help="GPU table model to size the challenges for")
    cost.add_argument(
        "--device", choices=["cuda", "cpu"], default="cuda", help="worker device (default cuda)"
    )
    cost.add_argument(
        "--target-seconds", type=float, default=3.0, help="validator target_seconds (default 3)"
    )
    cost.add_argument("--json", action="store_true", help="one JSON object on stdout")
    canary = sub.add_parser("canary-sim", help="availability a renter-refusing miner keeps; canaries' load")
    canary.add_argument("--canaries", type=int, default=20, help="canaries per miner (default 20)")
    canary.add_argument("--renters", type=int, default=10_000, help="real renters' asks (default 10000)")
    canary.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    canary.add_argument("--json", action="store_true", help="one JSON object on stdout")
    fleet.add_parser(sub)
    presence = sub.add_parser(
        "presence-sim", help="credit of one device behind 1-32 hotkeys, hit and run, validation load"
    )
    presence.add_argument("--days", type=float, default=14.0, help="days simulated (default 14)")
    presence.add_argument("--seeds", type=int, default=2, help="runs averaged per figure (default 2)")
    presence.add_argument(
        "--validators", default="8,64", help="comma-separated validator counts (default 8,64)"
    )
    presence.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser


def _presence_sim(args: argparse.Namespace) -> int:
    from compute.validator.rentals.canary import CanaryTiming
    from compute.validator.tools.presence_sim import Schedule, render, report

    try:
        counts = tuple(int(part) for part in args.validators.split(",") if part.strip())
    except ValueError:
        counts = ()
    if (
        not counts
        or not all(1 <= c <= 256 for c in counts)
        or not 1 <= args.days <= 60
        or not 1 <= args.seeds <= 20
    ):
        print("--validators must list counts 1..256, --days 1..60, --seeds 1..20", file=sys.stderr)
        return 2
    d = _defaults()
    schedule = Schedule(
        interval_s=d["round_blocks"] * DEFAULT_BLOCK_SECONDS,
        check_s=d["check_seconds"],
        canary_s=d["canary_rate"] * CanaryTiming.for_dwell(d["canary_dwell"]).expected_hold_s,
        budget=d["load_budget"],
        presence_share=d["presence_share"],
        presence_s=d["presence_seconds"],
        window=d["presence_window"],
        ema_alpha=d["ema_alpha"],
    )
    result = report(schedule, validators=counts, days=args.days, seeds=args.seeds)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        render(result)
    return 0 if result["ok"] else 1


def _canary_sim(args: argparse.Namespace) -> int:
    from compute.validator.tools.canary_sim import render, report

    if not 1 <= args.canaries <= 1000 or not 10 <= args.renters <= 1_000_000:
        print("--canaries must be 1..1000, --renters 10..1000000", file=sys.stderr)
        return 2
    d = _defaults()
    result = report(
        canaries=args.canaries,
        renters=args.renters,
        seed=args.seed,
        interval_s=d["round_blocks"] * DEFAULT_BLOCK_SECONDS,
        check_s=d["check_seconds"],
        budget=d["load_budget"],
        canary_rate=d["canary_rate"],
        dwell_s=d["canary_dwell"],
    )
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        render(result)
    return 0


def _report(args: argparse.Namespace) -> dict[str, Any]:
    d = _defaults()
    interval_s = d["round_blocks"] * DEFAULT_BLOCK_SECONDS
    return {
        "noise": noise_legend(),
        "sensitivity": credit_sensitivity(),
        "agreement": agreement_table(args.validators, args.miners, args.rounds, args.seed),
        "load": {
            "round_interval_s": interval_s,
            "check_seconds": d["check_seconds"],
            "budget": d["load_budget"],
            "rows": load_table(interval_s, d["check_seconds"], d["load_budget"]),
        },
        "params": {
            "validators": args.validators,
            "miners": args.miners,
            "rounds": args.rounds,
            "seed": args.seed,
        },
    }


def _render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title="How one measurement moves a miner's credit: std % (5-95 % range %) by proof length")
    table.add_column("noise source")
    works = [key[: -len("s_std_pct")] for key in report["sensitivity"][0] if key.endswith("s_std_pct")]
    for work in works:
        table.add_column(f"{work} s proof", justify="right")
    for row in report["sensitivity"]:
        table.add_row(
            row["source"], *(f"{row[f'{w}s_std_pct']:.2f} ({row[f'{w}s_range_pct']:.2f})" for w in works)
        )
    console.print(table)
    p = report["params"]
    table = Table(
        title=f"Agreement of {p['validators']} honest validators over {p['miners']} miners, {p['rounds']} rounds"
    )
    for column in (
        "noise",
        "design",
        "min cosine",
        "mean cosine",
        "min trust",
        "mean trust",
        "exact",
        "step cost",
    ):
        table.add_column(column, justify="left" if column in ("noise", "design") else "right")
    for row in report["agreement"]:
        table.add_row(
            row["noise"],
            row["design"],
            f"{row['min_cosine']:.4f}",
            f"{row['mean_cosine']:.4f}",
            f"{row['min_trust']:.4f}",
            f"{row['mean_trust']:.4f}",
            f"{row['exact_share']:.2f}",
            f"{row['credit_loss']:.3f}",
        )
    console.print(table)
    for noise in report["noise"]:
        low, high = noise["latency_ms"]
        console.print(
            f"  {noise['name']}: round trip {low:.0f}-{high:.0f} ms per validator-miner pair, "
            f"clock jitter {noise['jitter_ms']:.0f} ms, thermal +-{noise['thermal']:.0%} per measurement"
        )
    console.print(
        "  exact: share of miners every validator credits identically; step cost: mean credit the step took"
    )
    load = report["load"]
    table = Table(
        title=f"Validation load on one miner: round every {load['round_interval_s']:.0f} s, "
        f"{load['check_seconds']:.0f} GPU-s per test, "
        f"budget {load['budget']:.0%}"
    )
    for column in (
        "validators",
        "GPU time, every round",
        "p (test chance)",
        "tests/miner/round",
        "GPU time, budget",
    ):
        table.add_column(column, justify="right")
    for row in load["rows"]:
        table.add_row(
            str(row["validators"]),
            f"{row['load_every_round']:.2%}",
            f"{row['probability']:.3f}",
            f"{row['tests_per_round']:.2f}",
            f"{row['load_budgeted']:.2%}",
        )
    console.print(table)


def _check_cost(args: argparse.Namespace) -> int:
    from compute.validator.tools.check_cost import make_plan, run_plan

    try:
        figures = run_plan(make_plan(args.gpu, args.target_seconds), args.device)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"check-cost: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
    else:
        for key, value in figures.items():
            sys.stdout.write(f"{key:>16}  {value}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check-cost":
        return _check_cost(args)
    if args.command == "canary-sim":
        return _canary_sim(args)
    if args.command == "fleet-bench":
        return fleet.main(args)
    if args.command == "presence-sim":
        return _presence_sim(args)
    if not 2 <= args.validators <= 256 or not 1 <= args.miners <= 1024 or not 1 <= args.rounds <= 1000:
        print("--validators must be 2..256, --miners 1..1024, --rounds 1..1000", file=sys.stderr)
        return 2
    report = _report(args)
    if args.json:
        sys.stdout.write(json.dumps(report) + "\n")
    else:
        _render(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
