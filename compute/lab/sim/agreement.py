"""Agreement simulation: how measurement noise moves credits, and what keeps validators agreeing.

Model (one run = ``rounds`` rounds of ``validators`` validators testing the same ``miners``):

- a miner's GPU is one table model (``config/gpu_performance.yaml`` weight) with its own true
  efficiency in [0.92, 1.08] of the table's throughput (honest machines differ);
- a proof takes ``work_s`` seconds of compute; the validator times it on its own clock, so it also
  sees its round-trip latency to that miner (fixed per validator-miner pair, uniform in the noise
  model's range), a clock jitter (normal, per measurement) and thermal variation (uniform
  +-``thermal`` of throughput, per measurement);
- credit = weight x min(cap, measured / table throughput) -- the throughput term of the value
  function (the part noise reaches; memory and host terms are measured the same way);
- each validator keeps an EMA (``ema_alpha``) of its samples, tests a miner in a round with
  probability ``check_probability`` (the load budget) and applies the consensus step
  (``compute.scoring.consensus``) before normalising its weights.

Agreement is then measured the way the chain sees it: pairwise cosine of the weight vectors and
each validator's trust under Yuma consensus (``compute.chain.sim.yuma``). Pure numpy; seeded.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any

import numpy as np

from compute.chain.sim.yuma import cosine, yuma_epoch
from compute.lab.sim.defaults import validator_defaults
from compute.scoring.consensus import consensus_credit
from compute.validator.round.timing import DEFAULT_BLOCK_SECONDS

FLEET = ("H100 SXM", "A100 80GB", "RTX 4090", "L40S", "H200", "RTX 3090", "A100 40GB", "L4")
FALLBACK_WEIGHTS = {"H100 SXM": 3.3, "A100 80GB": 1.6, "RTX 4090": 0.7, "L40S": 1.0, "H200": 4.0}
RATIO_CAP = 1.1


@dataclass(frozen=True)
class Noise:
    name: str
    latency_ms: tuple[float, float]  # round trip per validator-miner pair, uniform in this range
    jitter_ms: float  # clock jitter per measurement (standard deviation)
    thermal: float  # +- share of throughput per measurement (uniform)


@dataclass(frozen=True)
class Design:
    name: str
    work_s: float  # compute seconds per proof
    ema_alpha: float = 1.0  # 1: no smoothing (the newest sample is the score)
    credit_step: float = 0.0  # consensus step; 0: off
    check_probability: float = 1.0  # chance a validator tests a miner in a round (load budget)


@dataclass(frozen=True)
class Agreement:
    noise: str
    design: str
    min_cosine: float
    mean_cosine: float
    min_trust: float
    mean_trust: float
    exact_share: float  # miners on which every validator's (stepped) credit is identical
    credit_loss: float  # mean share of credit the consensus step took from honest miners


NOISES = (
    Noise("none", (0.0, 0.0), 0.0, 0.0),
    Noise("modelled", (10.0, 200.0), 1.0, 0.05),
    Noise("harsh", (20.0, 400.0), 5.0, 0.10),
)

DESIGNS = (
    Design("latency-bound work 0.5 s, no EMA", 0.5),
    Design("GPU work 3 s, no EMA", 3.0),
    Design("GPU work 3 s, EMA 0.3 (default)", 3.0, 0.3),
    Design("GPU work 10 s, EMA 0.3", 10.0, 0.3),
    Design("default + credit step 5 %", 3.0, 0.3, 0.05),
    Design("default + credit step 20 %", 3.0, 0.3, 0.20),
    Design("default, 64 validators, 5 % load budget", 3.0, 0.3, 0.0, 0.075),  # 0.05 x 4320 / (64 x 45)
)


def fleet_weights(miners: int) -> np.ndarray:
    """Table weights of a mixed fleet (the GPU table when it loads, else built-in figures)."""
    try:
        from compute.scoring import load_gpu_table

        table = load_gpu_table()
        names = [name for name in FLEET if name in table.models] or list(table.models)
        weights = [table.models[name].weight for name in names]
    except Exception:  # the simulation still runs without the config file
        weights = list(FALLBACK_WEIGHTS.values())
    return np.array([weights[i % len(weights)] for i in range(miners)], dtype=np.float64)


def _measure(
    rng: np.random.Generator, noise: Noise, design: Design, efficiency: np.ndarray, rtt_s: np.ndarray
) -> np.ndarray:
    """One round's throughput ratio (measured / table) per validator x miner."""
    thermal = 1.0 + rng.uniform(-noise.thermal, noise.thermal, size=rtt_s.shape)
    jitter = np.abs(rng.normal(0.0, noise.jitter_ms / 1000.0, size=rtt_s.shape))
    elapsed = design.work_s / (efficiency[None, :] * thermal) + rtt_s + jitter
    return design.work_s / elapsed


def simulate(
    noise: Noise, design: Design, validators: int = 16, miners: int = 32, rounds: int = 20, seed: int = 0
) -> Agreement:
    rng = np.random.default_rng(seed)
    weight = fleet_weights(miners)
    efficiency = rng.uniform(0.92, 1.08, size=miners)
    low, high = noise.latency_ms
    rtt_s = rng.uniform(low, high, size=(validators, miners)) / 1000.0
    scores = np.full((validators, miners), np.nan)
    for _ in range(rounds):
        credit = weight[None, :] * np.minimum(RATIO_CAP, _measure(rng, noise, design, efficiency, rtt_s))
        drawn = np.isnan(scores) | (rng.random(scores.shape) < design.check_probability)
        updated = np.where(
            np.isnan(scores), credit, design.ema_alpha * credit + (1 - design.ema_alpha) * scores
        )
        scores = np.where(drawn, updated, scores)
    stepped = np.vectorize(lambda x: consensus_credit(float(x), design.credit_step))(scores)
    weights = stepped / stepped.sum(axis=1, keepdims=True)
    cosines = [cosine(weights[a], weights[b]) for a, b in combinations(range(validators), 2)] or [1.0]
    stake = rng.uniform(1.0, 10.0, size=validators)
    n = validators + miners
    full_stake = np.concatenate([stake, np.zeros(miners)])
    matrix = np.zeros((n, n))
    matrix[:validators, validators:] = weights
    trust = yuma_epoch(full_stake, matrix, [True] * validators + [False] * miners).validator_trust[
        :validators
    ]
    return Agreement(
        noise.name,
        design.name,
        round(min(cosines), 5),
        round(float(np.mean(cosines)), 5),
        round(float(trust.min()), 5),
        round(float(trust.mean()), 5),
        round(float(np.mean(np.all(np.isclose(stepped, stepped[0], rtol=1e-9, atol=0), axis=0))), 3),
        round(float(1.0 - (stepped / scores).mean()), 4),
    )


SOURCES = (
    Noise("latency 10-200 ms", (10.0, 200.0), 0.0, 0.0),
    Noise("clock jitter 1 ms", (0.0, 0.0), 1.0, 0.0),
    Noise("thermal +-5 %", (0.0, 0.0), 0.0, 0.05),
    Noise("all (modelled)", (10.0, 200.0), 1.0, 0.05),
)


def credit_sensitivity(
    works: tuple[float, ...] = (0.5, 3.0, 10.0), samples: int = 4096, seed: int = 0
) -> list[dict]:
    """How far one measurement moves a miner's credit, per noise source and work size: the
    relative standard deviation and the 5-95 % range of credit / noiseless credit, in per cent."""
    rng = np.random.default_rng(seed)
    rows = []
    for source in SOURCES:
        row: dict = {"source": source.name}
        for work in works:
            low, high = source.latency_ms
            rtt = rng.uniform(low, high, size=(samples, 1)) / 1000.0
            ratio = _measure(rng, source, Design("", work), np.ones(1), rtt)[:, 0]
            row[f"{work:g}s_std_pct"] = round(float(ratio.std() / ratio.mean() * 100), 2)
            row[f"{work:g}s_range_pct"] = round(float(np.ptp(np.percentile(ratio, [5, 95])) * 100), 2)
        rows.append(row)
    return rows


def noise_legend() -> list[dict]:
    """The noise levels as plain dicts (name, latency range, jitter, thermal)."""
    return [asdict(noise) for noise in NOISES]


def agreement_table(validators: int = 16, miners: int = 32, rounds: int = 20, seed: int = 0) -> list[dict]:
    """Every design under every noise level, as plain dicts (for the table and ``--json``)."""
    return [
        asdict(simulate(noise, design, validators, miners, rounds, seed))
        for noise in NOISES
        for design in DESIGNS
    ]


@dataclass(frozen=True)
class LoadRow:
    validators: int
    interval_s: float
    check_s: float
    load_every_round: float  # every validator tests every miner every round
    probability: float  # chance a validator tests a miner in a round under the budget
    tests_per_round: float  # expected proofs per miner per round under the budget
    load_budgeted: float


def load_table(
    interval_s: float, check_s: float, budget: float, counts: tuple[int, ...] = (1, 16, 64)
) -> list[dict]:
    """Share of a miner's GPU time spent on validation proofs, without and with the load budget."""
    from compute.validator.round.schedule import check_probability, validation_load

    rows = []
    for count in counts:
        p = check_probability(count, interval_s, check_s, budget)
        rows.append(
            asdict(
                LoadRow(
                    count,
                    interval_s,
                    round(check_s, 2),
                    round(validation_load(count, interval_s, check_s), 4),
                    round(p, 4),
                    round(count * p, 2),
                    round(validation_load(count, interval_s, check_s, p), 4),
                )
            )
        )
    return rows


def _report(args: Any) -> dict[str, Any]:
    d = validator_defaults()
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


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m compute bench agreement-sim", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--validators", type=int, default=16, help="validators simulated (default 16)")
    parser.add_argument("--miners", type=int, default=32, help="miners simulated (default 32)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds simulated (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if not 2 <= args.validators <= 256 or not 1 <= args.miners <= 1024 or not 1 <= args.rounds <= 1000:
        print("--validators must be 2..256, --miners 1..1024, --rounds 1..1000", file=sys.stderr)
        return 2
    result = _report(args)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        _render(result)
    return 0
