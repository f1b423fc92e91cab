"""``python -m compute bench canary-sim``: what a miner keeps by refusing renters, and what canaries cost.

From the validator's own pieces, without a network: the renters' table (``rentals.shapes``), the
signer deck of ``fleet.canaries`` and the ``RentalLedger`` that turns outcomes into availability.

- **Strategies.** A miner decides per rental from what it sees: the signer (a validator's hotkey,
  an operator key on a validator's coldkey, an operator key on a coldkey of its own that some
  validator canaries through, or a key none does) and the ask. Real renters and canaries ask from
  the same table. Per strategy: the availability the ledger gives after ``canaries`` canaries, and
  the share of real renters the miner serves, for three canaries: ``old`` (60 s, no idempotency
  key, 1 GB, the validator's hotkey), ``in turn`` (renters' asks, signed in turn by the validator's
  hotkey and an operator key of its wallet: on its coldkey) and ``new`` (renters' asks, signed by
  operator identities on coldkeys of their own: the desk's choice for a miner open to renters).
- **Load.** The canaries' share of a miner's GPU time next to the tests', at 8 and 64 validators
  with the production schedule (both inside the load budget).
- **Asks.** How often the ask is register.py's default, terms, GPU counts.

What it deliberately does not do: model miners pooling logs, or sessions watched after serving
(docs/threat-model.md lists those).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from compute.validator.rentals.canary import CanaryOutcome, CanaryTiming
from compute.validator.rentals.ledger import RentalLedger
from compute.validator.rentals.shapes import Machine, RentalShape, draw_shape
from compute.validator.round.schedule import check_probability

VALIDATOR, OPERATOR, UNLISTED = "validator hotkey", "operator key (canaries)", "operator key (no canaries)"
LINKED = "operator key on a validator's coldkey"
RENTER_SIGNERS = ((VALIDATOR, 0.4), (OPERATOR, 0.4), (UNLISTED, 0.2))  # who real renters sign as
DECKS = {"in turn": [VALIDATOR, LINKED], "new": [OPERATOR]}  # who signs the canaries
MACHINE = Machine(gpus=8, cpus=64, ram_gb=512.0, disk_gb=2000.0)
OLD_CANARY = RentalShape(gpu_count=1, cpu_count=1, ram_gb=1.0, disk_gb=1.0, ports=0, term_s=60)


@dataclass(frozen=True)
class Ask:
    """One rental request as the miner sees it."""

    signer: str
    shape: RentalShape
    idempotency_key: bool = True


def _old_canary_look(ask: Ask) -> bool:
    shape = ask.shape
    return shape.term_s <= 900 or not ask.idempotency_key or shape.disk_gb <= 1.0


def _default_ask(ask: Ask) -> bool:
    return ask.shape == ask.shape.plain()


# strategy -> (serves this ask?, says "unsupported" instead of "no capacity" when it refuses)
STRATEGIES: dict[str, tuple[Callable[[Ask], bool], bool]] = {
    "honest": (lambda ask: True, False),
    "refuses every renter": (lambda ask: False, False),
    "canary-aware (validators + old canary shape)": (
        lambda ask: ask.signer == VALIDATOR or _old_canary_look(ask),
        False,
    ),
    "canary-aware (validators' coldkeys on chain + old canary shape)": (
        lambda ask: ask.signer in (VALIDATOR, LINKED) or _old_canary_look(ask),
        False,
    ),
    "serves keys that canary, refuses the rest": (lambda ask: ask.signer != UNLISTED, False),
    "refuses asks above register.py defaults (no capacity)": (_default_ask, False),
    "caps asks at register.py defaults (unsupported)": (_default_ask, True),
}


def canary_outcome(serves: Callable[[Ask], bool], unsupported: bool, ask: Ask) -> bool:
    """What the canary of ``rentals.canary`` concludes: an ask refused as unsupported is asked again
    with register.py's defaults; a "no capacity" is asked again later, and refused again."""
    if serves(ask):
        return True
    if unsupported and ask.shape != ask.shape.plain():
        return serves(Ask(ask.signer, ask.shape.plain(), ask.idempotency_key))
    return False


def strategy_rows(canaries: int, renters: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    signers = [signer for signer, _ in RENTER_SIGNERS]
    weights = [weight for _, weight in RENTER_SIGNERS]
    real = [Ask(rng.choices(signers, weights)[0], draw_shape(rng, MACHINE)) for _ in range(renters)]
    rows = []
    for name, (serves, unsupported) in STRATEGIES.items():
        served = sum(serves(ask) for ask in real) / renters
        for kind in ("new", "in turn", "old"):
            ledger, deck = RentalLedger(window=canaries), list(DECKS.get(kind, [VALIDATOR]))
            for i in range(canaries):
                if kind == "old":
                    ask = Ask(VALIDATOR, OLD_CANARY, idempotency_key=False)
                else:
                    if i % len(deck) == 0:
                        rng.shuffle(deck)
                    ask = Ask(deck[i % len(deck)], draw_shape(rng, MACHINE))
                ledger.canary("miner", CanaryOutcome(canary_outcome(serves, unsupported, ask)))
            rows.append(
                {
                    "strategy": name,
                    "canaries": kind,
                    "availability": round(ledger.availability("miner"), 4),
                    "real_renters_served": round(served, 4),
                }
            )
    return rows


def load_rows(
    interval_s: float, check_s: float, budget: float, canary_rate: float, timing: CanaryTiming
) -> list[dict]:
    """Per validator count: the test chance, and the tests' and canaries' shares of a 1-GPU miner's
    GPU time (a canary holds at most the whole machine for ``expected_hold_s``)."""
    hold = timing.expected_hold_s
    rows = []
    for validators in (8, 64):
        p = check_probability(validators, interval_s, check_s + canary_rate * hold, budget)
        tests = validators * p * check_s / interval_s
        canaries = validators * p * canary_rate * hold / interval_s
        rows.append(
            {
                "validators": validators,
                "probability": round(p, 4),
                "canaries_per_miner_per_day": round(validators * p * canary_rate * 86400 / interval_s, 2),
                "tests_share": round(tests, 5),
                "canaries_share": round(canaries, 5),
                "total_share": round(tests + canaries, 5),
                "budget": budget,
            }
        )
    return rows


def ask_figures(samples: int, seed: int) -> dict:
    rng = random.Random(seed)
    asks = [draw_shape(rng, MACHINE) for _ in range(samples)]
    terms_h = sorted(a.term_s / 3600 for a in asks)
    gpus = statistics.multimode(a.gpu_count for a in asks)
    return {
        "samples": samples,
        "register_py_default_share": round(sum(a == a.plain() for a in asks) / samples, 4),
        "term_hours_median": terms_h[samples // 2],
        "term_hours_mean": round(statistics.fmean(terms_h), 2),
        "term_hours_p90": terms_h[int(samples * 0.9)],
        "term_under_15_min_share": sum(t < 0.25 for t in terms_h) / samples,
        "gpu_count_mode": gpus[0],
        "gpu_counts": {str(g): round(sum(a.gpu_count == g for a in asks) / samples, 4) for g in (1, 2, 4, 8)},
    }


def report(
    *,
    canaries: int,
    renters: int,
    seed: int,
    interval_s: float,
    check_s: float,
    budget: float,
    canary_rate: float,
    dwell_s: float,
) -> dict:
    timing = CanaryTiming.for_dwell(dwell_s)
    return {
        "strategies": strategy_rows(canaries, renters, seed),
        "load": load_rows(interval_s, check_s, budget, canary_rate, timing),
        "asks": ask_figures(renters, seed),
        "params": {
            "canaries": canaries,
            "renters": renters,
            "seed": seed,
            "renter_signers": dict(RENTER_SIGNERS),
            "round_interval_s": interval_s,
            "check_seconds": check_s,
            "canary_rate": canary_rate,
            "canary_hold_s": timing.expected_hold_s,
        },
    }


def render(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    p = result["params"]
    table = Table(title=f"Availability after {p['canaries']} canaries, and real renters served")
    for column in ("miner's strategy", "canaries", "availability", "real renters served"):
        table.add_column(column, justify="left" if column == "miner's strategy" else "right")
    for row in result["strategies"]:
        table.add_row(
            row["strategy"],
            row["canaries"],
            f"{row['availability']:.2f}",
            f"{row['real_renters_served']:.0%}",
        )
    console.print(table)
    table = Table(
        title=f"GPU time of one 1-GPU miner, canary rate {p['canary_rate']}, hold {p['canary_hold_s']:.0f} s"
    )
    for column in ("validators", "p", "canaries/day", "tests", "canaries", "total", "budget"):
        table.add_column(column, justify="right")
    for row in result["load"]:
        table.add_row(
            str(row["validators"]),
            f"{row['probability']:.3f}",
            f"{row['canaries_per_miner_per_day']:.1f}",
            f"{row['tests_share']:.2%}",
            f"{row['canaries_share']:.2%}",
            f"{row['total_share']:.2%}",
            f"{row['budget']:.0%}",
        )
    console.print(table)
    asks = result["asks"]
    console.print(
        f"asks: register.py's default {asks['register_py_default_share']:.0%}; term median "
        f"{asks['term_hours_median']:g} h, mean {asks['term_hours_mean']:g} h, p90 {asks['term_hours_p90']:g} h; "
        f"GPUs (8-GPU machine) {asks['gpu_counts']}"
    )


__all__ = ["STRATEGIES", "report", "render"]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    from compute.lab.sim.defaults import validator_defaults
    from compute.validator.round.timing import DEFAULT_BLOCK_SECONDS

    parser = argparse.ArgumentParser(
        prog="python -m compute bench canary-sim", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--canaries", type=int, default=20, help="canaries per miner (default 20)")
    parser.add_argument("--renters", type=int, default=10_000, help="real renters' asks (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if not 1 <= args.canaries <= 1000 or not 10 <= args.renters <= 1_000_000:
        print("--canaries must be 1..1000, --renters 10..1000000", file=sys.stderr)
        return 2
    d = validator_defaults()
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
