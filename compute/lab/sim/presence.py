"""presence-sim: what one device earns behind many hotkeys, or present only now and then, under the
production schedule, through the validator's own schedule and credit functions.

Every validator is simulated on its own clock over ``days`` (nothing is shared between validators
but the device). For each one, with the functions the validator runs:

- **Rounds** every ``interval_s``: each hotkey is due with ``check_probability`` (the throughput
  share of the load budget, canaries' GPU time included) or always when the validator has no
  positive score for it. The due hotkeys share one lockstep window at a random moment of the round;
  in it the device proves itself for at most ONE of them (the others are absent: sample 0). The
  cheater's best play: the device always answers one due hotkey's window (it sees the allocate).
  Samples (1 = the device's capacity) feed ``update_score`` (the EMA).
- **Presence checks** at the moments ``next_delay(presence_interval(...))`` draws: every hotkey at
  once; the device is behind at most one (where the strategy put it), all others are absent.
- **Credit** = score x ``presence_shares`` over the validator's last ``window`` checks, integrated
  over time (piecewise constant between the validator's own events).

The yardstick is the same device behind one honest hotkey, always there. ``multiple`` = the
pool's summed credit over the horizon / the honest device's; ``first_day`` the same over the
first day (the first-round windfall); ``without_presence`` the same pool under the snapshot design
(score alone, each hotkey tested on its own), for comparison. Hit and run: one fresh hotkey whose device is there a
share ``f`` of each day (one stretch at a random hour); ``per_gpu_hour`` = its credit per hour the
device was there / the honest device's credit per hour. Pure: seeded ``random.Random``.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compute.scoring import DEFAULT_WINDOW, ScoringConfig, presence_shares, update_score
from compute.validator.presence.schedule import next_delay, presence_interval, presence_load, split_budget
from compute.validator.round.schedule import check_probability, validation_load

DAY_S = 86_400.0
Placement = Callable[[float], "int | None"]  # where the device is at a moment: a hotkey index, or away


@dataclass(frozen=True)
class Schedule:
    """The production schedule (the validator's defaults)."""

    interval_s: float = 360 * 12.0
    check_s: float = 45.0
    canary_s: float = 0.0  # canaries' expected GPU seconds per test drawn (counted in the budget)
    budget: float = 0.05
    presence_share: float = 0.4
    presence_s: float = 10.0
    window: int = DEFAULT_WINDOW
    ema_alpha: float = 0.3

    def chance(self, validators: int) -> float:
        throughput, _ = split_budget(self.budget, self.presence_share)
        return check_probability(validators, self.interval_s, self.check_s + self.canary_s, throughput)

    def mean_check_s(self, validators: int) -> float:
        _, presence = split_budget(self.budget, self.presence_share)
        return presence_interval(validators, self.presence_s, presence)

    def load(self, validators: int) -> dict[str, float]:
        p = self.chance(validators)
        throughput = validation_load(validators, self.interval_s, self.check_s + self.canary_s, p)
        presence = presence_load(validators, self.presence_s, self.mean_check_s(validators))
        return {
            "throughput": throughput,
            "presence": presence,
            "total": throughput + presence,
            "test_chance": p,
            "checks_per_day": DAY_S / self.mean_check_s(validators),
        }


def _events(schedule: Schedule, validators: int, days: float, rng: random.Random) -> list[tuple[float, str]]:
    """One validator's rounds (at a random moment of each round's first half) and presence checks."""
    horizon = days * DAY_S
    events = [
        (k * schedule.interval_s + rng.uniform(0, schedule.interval_s / 2), "round")
        for k in range(int(horizon // schedule.interval_s))
    ]
    mean, t = schedule.mean_check_s(validators), 0.0
    while True:
        t += next_delay(mean, rng)
        if not math.isfinite(t) or t >= horizon:
            break
        events.append((t, "check"))
    return sorted(events)


def _validator(
    schedule: Schedule,
    validators: int,
    hotkeys: int,
    placement: Placement,
    days: float,
    seed: int,
    present: Callable[[float], bool] | None = None,
    snapshot: bool = False,
) -> list[float]:
    """One validator's time-integrated credit per hotkey (credit x seconds) over ``days``.

    ``seed`` fixes the validator's own moments and draws (the yardstick and a cheater meet the same
    validator); ``present``: when the device can answer a round's window (default: always);
    ``snapshot``: credit the score alone (the design before presence, for comparison)."""
    config = ScoringConfig(ema_alpha=schedule.ema_alpha)
    events = _events(schedule, validators, days, random.Random(seed))
    draws = random.Random(seed + 1_000_003)
    scores: list[float | None] = [None] * hotkeys
    checks: list[dict[str, float]] = []
    integral = [0.0] * hotkeys
    shares: dict[str, float] | None = None
    last = 0.0
    p = schedule.chance(validators)

    def credit(h: int) -> float:
        return (scores[h] or 0.0) * (1.0 if snapshot else (shares or {}).get(str(h), 0.0))

    for t, kind in events:
        for h in range(hotkeys):  # credit held since the last event
            integral[h] += credit(h) * (t - last)
        last = t
        if kind == "round":
            drawn = [draws.random() < p for _ in range(hotkeys)]
            due = [h for h in range(hotkeys) if not (scores[h] or 0.0) > 0 or drawn[h]]
            there = present(t) if present is not None else True
            # one hotkey of the window at most (the snapshot design tested each on its own)
            winner = due[0] if due and there else None
            for h in due:
                passed = there if snapshot else h == winner
                scores[h] = update_score(scores[h], 1.0 if passed else 0.0, config)
        else:
            holder = placement(t)
            checks.append({str(h): float(h == holder) for h in range(hotkeys) if scores[h] is not None})
            shares = presence_shares(checks, schedule.window)
    horizon = days * DAY_S
    for h in range(hotkeys):
        integral[h] += credit(h) * (horizon - last)
    return integral


def _seeds(seed: int, validators: int) -> list[int]:
    """One seed per validator (the same validators for the yardstick and every cheater)."""
    return [seed * 1_000_000 + v * 7919 for v in range(validators)]


def _rotating(hotkeys: int, every_s: float, days: float, rng: random.Random) -> Placement:
    """The device moves to a random hotkey every ``every_s`` (a cheater cannot know the checks)."""
    slots = [rng.randrange(hotkeys) for _ in range(int(days * DAY_S / every_s) + 2)]
    return lambda t: slots[int(t // every_s)]


def _present_share(share: float, rng: random.Random) -> Callable[[float], bool]:
    """There ``share`` of every day, in one stretch starting at a random hour."""
    start = rng.uniform(0, DAY_S)
    return lambda t: ((t - start) % DAY_S) < share * DAY_S


@functools.lru_cache(maxsize=64)
def honest_credit(
    schedule: Schedule, validators: int, days: float, seed: int, snapshot: bool = False
) -> float:
    """The yardstick: the device behind one honest hotkey, always there (credit x s, all validators)."""
    return sum(
        _validator(schedule, validators, 1, lambda t: 0, days, v, snapshot=snapshot)[0]
        for v in _seeds(seed, validators)
    )


def pool_multiple(
    schedule: Schedule,
    validators: int,
    hotkeys: int,
    strategy: str,
    days: float,
    seed: int,
    snapshot: bool = False,
) -> float:
    """The pool's credit over the honest device's, both summed over every validator (``snapshot``:
    both credited their score alone, each hotkey tested on its own: the design before presence)."""
    rng = random.Random(seed * 7919 + hotkeys)
    if strategy == "fixed":  # one device: one place at a time, the same for every validator
        placement: Placement = lambda t: 0  # noqa: E731
    else:
        placement = _rotating(hotkeys, {"rotate-1h": 3600.0, "rotate-1d": DAY_S}[strategy], days, rng)
    total = sum(
        sum(_validator(schedule, validators, hotkeys, placement, days, v, snapshot=snapshot))
        for v in _seeds(seed, validators)
    )
    return total / honest_credit(schedule, validators, days, seed, snapshot)


def hit_and_run(
    schedule: Schedule, validators: int, share: float, days: float, seed: int, snapshot: bool = False
) -> float:
    """Credit per hour the device was there, over the honest device's credit per hour."""
    there = _present_share(share, random.Random(seed * 104729 + int(share * 1000)))
    total = sum(
        _validator(schedule, validators, 1, lambda t: 0 if there(t) else None, days, v, there, snapshot)[0]
        for v in _seeds(seed, validators)
    )
    honest = honest_credit(schedule, validators, days, seed, snapshot)
    return (total / share) / honest if honest > 0 else 0.0


def report(
    schedule: Schedule | None = None,
    validators: Sequence[int] = (8, 64),
    hotkeys: Sequence[int] = (1, 2, 4, 8, 16, 32),
    presence: Sequence[float] = (0.01, 0.02, 0.05, 0.10),
    days: float = 14.0,
    seeds: int = 2,
) -> dict:
    """The figures for each number of validators, and whether every target holds."""
    schedule = schedule or Schedule()
    rows: list[dict[str, Any]] = []
    for count in validators:
        pool: list[dict[str, Any]] = []
        for k in hotkeys:
            by, first = {}, {}
            for strategy in ("fixed", "rotate-1h"):
                by[strategy] = statistics.fmean(
                    pool_multiple(schedule, count, k, strategy, days, seed) for seed in range(seeds)
                )
                first[strategy] = statistics.fmean(
                    pool_multiple(schedule, count, k, strategy, 1.0, seed) for seed in range(seeds)
                )
            before = statistics.fmean(
                pool_multiple(schedule, count, k, "fixed", days, seed, snapshot=True) for seed in range(seeds)
            )
            pool.append(
                {
                    "hotkeys": k,
                    "multiple": max(by.values()),
                    "first_day": max(first.values()),
                    "by_strategy": by,
                    "without_presence": before,
                }
            )
        runs: list[dict[str, Any]] = [
            {
                "presence": f,
                "per_gpu_hour": statistics.fmean(
                    hit_and_run(schedule, count, f, days, s) for s in range(seeds)
                ),
                "without_presence": statistics.fmean(
                    hit_and_run(schedule, count, f, days, s, snapshot=True) for s in range(seeds)
                ),
            }
            for f in presence
        ]
        best = max(max(float(row["multiple"]), float(row["first_day"])) for row in pool)
        rows.append(
            {
                "validators": count,
                "load": schedule.load(count),
                "pool": pool,
                "best_multiple": best,
                "hit_and_run": runs,
                "worst_per_gpu_hour": max(float(run["per_gpu_hour"]) for run in runs),
            }
        )
    targets = {"multiple": 1.05, "per_gpu_hour": 1.05, "load": 0.05}
    ok = all(
        row["best_multiple"] <= targets["multiple"]
        and row["worst_per_gpu_hour"] <= targets["per_gpu_hour"]
        and row["load"]["total"] <= targets["load"] + 1e-9
        for row in rows
    )
    return {
        "schedule": schedule.__dict__,
        "days": days,
        "seeds": seeds,
        "rows": rows,
        "targets": targets,
        "ok": ok,
    }


def render(result: dict) -> None:
    """The figures as tables (people read this; ``--json`` prints ``result`` instead)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if __import__("sys").stdout.isatty() else 160)
    targets = result["targets"]
    for row in result["rows"]:
        load = row["load"]
        table = Table(
            title=f"{row['validators']} validators: load {load['total']:.2%} of a miner's GPU time "
            f"(throughput {load['throughput']:.2%}, presence {load['presence']:.2%}); test chance "
            f"{load['test_chance']:.3f} per round, {load['checks_per_day']:.1f} presence checks per "
            f"validator per day"
        )
        for column in (
            "hotkeys on one device",
            "credit multiple",
            "first day",
            "fixed",
            "rotate-1h",
            "without presence",
        ):
            table.add_column(column, justify="right")
        for pool in row["pool"]:
            by = pool["by_strategy"]
            table.add_row(
                str(pool["hotkeys"]),
                f"{pool['multiple']:.3f}",
                f"{pool['first_day']:.3f}",
                f"{by['fixed']:.3f}",
                f"{by['rotate-1h']:.3f}",
                f"{pool['without_presence']:.3f}",
            )
        console.print(table)
        runs = ", ".join(
            f"{r['presence']:.0%}: {r['per_gpu_hour']:.3f} ({r['without_presence']:.2f} without presence)"
            for r in row["hit_and_run"]
        )
        console.print(f"  hit and run, credit per GPU-hour / honest, by presence: {runs}")
        console.print(
            f"  best multiple {row['best_multiple']:.3f} (target <= {targets['multiple']}), worst hit and run "
            f"{row['worst_per_gpu_hour']:.3f} (<= {targets['per_gpu_hour']}), load {load['total']:.2%} "
            f"(<= {targets['load']:.0%})"
        )
    console.print("all targets met" if result["ok"] else "TARGETS MISSED")


__all__ = ["Schedule", "hit_and_run", "honest_credit", "pool_multiple", "render", "report"]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    from compute.lab.sim.defaults import validator_defaults
    from compute.validator.rentals.canary import CanaryTiming
    from compute.validator.round.timing import DEFAULT_BLOCK_SECONDS

    parser = argparse.ArgumentParser(
        prog="python -m compute bench presence-sim", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--days", type=float, default=14.0, help="days simulated (default 14)")
    parser.add_argument("--seeds", type=int, default=2, help="runs averaged per figure (default 2)")
    parser.add_argument(
        "--validators", default="8,64", help="comma-separated validator counts (default 8,64)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
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
    d = validator_defaults()
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
