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

from .network import NETUID, LocalNet


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
    return {
        "validators": validators,
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
    """Validators that wrote no weights (the consensus view would be missing their vote)."""
    return [
        f"{v['name']} (uid {v['uid']}) wrote no weights"
        for v in consensus["validators"]
        if not v["set_weights"]
    ]


def render_consensus(consensus: dict[str, Any], console: Console) -> None:
    miners = [str(m["uid"]) for m in consensus["miners"]]
    table = Table(title="Validators' weights on chain and Yuma consensus")
    for column in ("validator", "uid", "stake", *(f"w[{uid}]" for uid in miners), "trust", "dividends"):
        table.add_column(column, justify="left" if column == "validator" else "right")
    for v in consensus["validators"]:
        table.add_row(
            v["name"],
            str(v["uid"]),
            f"{v['stake']:.0f}",
            *(f"{v['weights'][uid]:.4f}" for uid in miners),
            f"{v['trust']:.4f}",
            f"{v['dividends']:.4f}",
        )
    table.add_row(
        "consensus", "", "", *(f"{m['consensus']:.4f}" for m in consensus["miners"]), "", "", style="bold"
    )
    console.print(table)
    pairs = ", ".join(f"{p['a']}~{p['b']} {p['cosine']:.4f}" for p in consensus["pairwise_cosine"])
    console.print(
        f"pairwise weight cosine: {pairs or '-'} (min {consensus['min_cosine']:.4f}); "
        f"min validator trust {consensus['min_trust']:.4f}"
    )
