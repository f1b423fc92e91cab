"""The demo's consensus view: every validator's weights on chain, their agreement, Yuma trust.

Reads the simulated chain only and runs the chain's own formula (``compute.chain.sim.yuma``) over
it, so the figures are what the real chain would conclude from the same weights: pairwise cosine
similarity of the validators' weight vectors over the miners, each validator's consensus trust,
and each miner's consensus weight and incentive.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from rich.console import Console
from rich.table import Table

from compute.chain.sim import SimChainState
from compute.chain.sim.epoch import epoch_inputs
from compute.chain.sim.yuma import cosine, yuma_epoch
from compute.store import ValidatorStore

from .network import NETUID, LocalNet

# What "the validators agree" means on this demo: the weight vectors' cosine and each
# validator's Yuma trust, on miners whose weights differ by at least MIN_SPREAD (fastest/slowest).
MIN_COSINE = 0.99
MIN_TRUST = 0.95
MIN_SPREAD = 1.2


def honest_failures(net: LocalNet) -> list[dict[str, Any]]:
    """Every failed test of an honest miner, by any validator, in any round (with its reasons)."""
    honest = {m.uid: m.name for m in net.miners}
    failures = []
    for validator in net.validators:
        path = net.workdir / validator.name / f"validator-{NETUID}.db"
        if not path.exists():
            continue
        store = ValidatorStore(path)
        try:
            for round_id in range(1, store.rounds_finished() + 1):
                for result in store.results(round_id):
                    if result.uid in honest and not result.ok:
                        failures.append(
                            {
                                "validator": validator.name,
                                "round": round_id,
                                "miner": honest[result.uid],
                                "uid": result.uid,
                                "reasons": list(result.reasons[:2]),
                            }
                        )
        finally:
            store.close()
    return failures


def collect_consensus(net: LocalNet) -> dict[str, Any]:
    """Per validator: uid, stake, weight vector over the miners, Yuma trust; pairwise cosines."""
    stake, weights, permit = epoch_inputs(SimChainState.open(net.chain_path), NETUID)
    result = yuma_epoch(stake, weights, permit)
    miner_uids = [m.uid for m in net.miners]
    vectors = {v.name: result.weights[v.uid, miner_uids] for v in net.validators}
    validators = [
        {
            "name": v.name,
            "uid": v.uid,
            "stake": float(stake[v.uid]),
            "weights": {
                str(uid): round(float(w), 6) for uid, w in zip(miner_uids, vectors[v.name], strict=True)
            },
            "set_weights": bool(vectors[v.name].sum() > 0),
            "trust": round(float(result.validator_trust[v.uid]), 6),
            "dividends": round(float(result.dividends[v.uid]), 6),
        }
        for v in net.validators
    ]
    cosines = {
        (a.name, b.name): round(cosine(vectors[a.name], vectors[b.name]), 6)
        for a, b in combinations(net.validators, 2)
    }
    pairs = [{"a": a, "b": b, "cosine": value} for (a, b), value in cosines.items()]
    shares = [float(result.consensus[uid]) for uid in miner_uids]
    for index, entry in enumerate(validators):
        entry["latency_ms"] = net.latency_of(index)
    return {
        "validators": validators,
        "miner_speeds": {m.name: net.miner_speed(i) for i, m in enumerate(net.miners)},
        "weight_spread": round(max(shares) / min(shares), 4) if shares and min(shares) > 0 else None,
        "honest_failures": honest_failures(net),
        "targets": {"min_cosine": MIN_COSINE, "min_trust": MIN_TRUST, "min_spread": MIN_SPREAD},
        "pairwise_cosine": pairs,
        "min_cosine": min(cosines.values(), default=1.0),
        "min_trust": min(float(result.validator_trust[v.uid]) for v in net.validators),
        "miners": [
            {
                "uid": uid,
                "consensus": round(float(result.consensus[uid]), 6),
                "incentive": round(float(result.incentive[uid]), 6),
            }
            for uid in miner_uids
        ],
    }


def consensus_problems(consensus: dict[str, Any]) -> list[str]:
    """Validators that wrote no weights; with several validators, any failed test of an honest
    miner and agreement below the targets (cosine, trust)."""
    problems = [
        f"{v['name']} (uid {v['uid']}) wrote no weights"
        for v in consensus["validators"]
        if not v["set_weights"]
    ]
    if len(consensus["validators"]) < 2:
        return problems
    problems += [
        f"{f['validator']} failed honest {f['miner']} (uid {f['uid']}) in round {f['round']}: "
        + "; ".join(f["reasons"])
        for f in consensus.get("honest_failures", [])
    ]
    if consensus["min_cosine"] < MIN_COSINE:
        problems.append(
            f"validators disagree: min weight cosine {consensus['min_cosine']:.4f} < {MIN_COSINE}"
        )
    if consensus["min_trust"] < MIN_TRUST:
        problems.append(f"a validator's Yuma trust {consensus['min_trust']:.4f} < {MIN_TRUST}")
    spread, speeds = consensus.get("weight_spread"), consensus.get("miner_speeds") or {}
    if spread is not None and len(set(speeds.values())) > 1 and spread < MIN_SPREAD:
        problems.append(f"miners of different speeds got weights only {spread:.2f}x apart (< {MIN_SPREAD})")
    return problems


def render_consensus(consensus: dict[str, Any], console: Console) -> None:
    miners = [str(m["uid"]) for m in consensus["miners"]]
    table = Table(title="Validators' weights on chain and Yuma consensus")
    columns = ("validator", "uid", "stake", "rtt ms", *(f"w[{uid}]" for uid in miners), "trust", "dividends")
    for column in columns:
        table.add_column(column, justify="left" if column == "validator" else "right")
    for v in consensus["validators"]:
        table.add_row(
            v["name"],
            str(v["uid"]),
            f"{v['stake']:.0f}",
            f"{v.get('latency_ms', 0):g}",
            *(f"{v['weights'][uid]:.4f}" for uid in miners),
            f"{v['trust']:.4f}",
            f"{v['dividends']:.4f}",
        )
    table.add_row(
        "consensus", "", "", "", *(f"{m['consensus']:.4f}" for m in consensus["miners"]), "", "", style="bold"
    )
    console.print(table)
    pairs = ", ".join(f"{p['a']}~{p['b']} {p['cosine']:.4f}" for p in consensus["pairwise_cosine"])
    spread = consensus.get("weight_spread")
    console.print(
        f"pairwise weight cosine: {pairs or '-'} (min {consensus['min_cosine']:.4f}); "
        f"min validator trust {consensus['min_trust']:.4f}; consensus weights fastest/slowest "
        f"{spread if spread is not None else '-'}; honest failures {len(consensus.get('honest_failures', []))}"
    )
