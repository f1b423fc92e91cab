"""The demo's scoreboard: what the validator concluded (its store) and what the chain holds (weights).

Reads only; the numbers come from the validator's own SQLite state and the simulated chain, so
the scoreboard shows exactly what a validator on a real network would have written.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from compute.chain import connect
from compute.store import ValidatorStore

from .network import NETUID, LocalNet, LocalnetError


def collect_summary(net: LocalNet) -> dict[str, Any]:
    """Per miner: uid, hotkey, verdict, identified device, measured TFLOPS, score, weight."""
    assert net.validator is not None
    store_path = net.workdir / "validator" / f"validator-{NETUID}.db"
    if not store_path.exists():
        raise LocalnetError(f"validator wrote no state at {store_path}")
    store = ValidatorStore(store_path)
    chain = connect(f"sim:{net.chain_path}", NETUID)
    try:
        weights = chain.weights(net.validator.uid)
        scores = store.scores()
        rounds = store.rounds_finished()
        miners = []
        for miner in net.miners:
            hotkey = miner.wallet.hotkey.ss58_address
            result = _latest_result(store, miner.uid, rounds)
            score = scores.get(miner.uid)
            miners.append(
                {
                    "name": miner.name,
                    "uid": miner.uid,
                    "hotkey": hotkey,
                    "verdict": _verdict(result),
                    "reasons": list(result.reasons) if result else [],
                    "device": ", ".join(sorted(set(result.models))) if result and result.models else None,
                    "tflops_fp16": result.tflops_fp16 if result else None,
                    "tflops_fp32": result.tflops_fp32 if result else None,
                    "memory_gbs": result.mem_gbs if result else None,
                    "sustained_ratio": result.sustained_ratio if result else None,
                    "score": score.score if score else 0.0,
                    "weight": weights.get(miner.uid, 0.0),
                }
            )
        return {
            "netuid": NETUID,
            "chain": str(net.chain_path),
            "validator": {"uid": net.validator.uid, "hotkey": net.validator.wallet.hotkey.ss58_address},
            "rounds": rounds,
            "block": chain.block(),
            "miners": miners,
            "weights_on_chain": {str(uid): w for uid, w in sorted(weights.items())},
        }
    finally:
        chain.close()
        store.close()


def _latest_result(store: ValidatorStore, uid: int, rounds: int):
    for round_id in range(rounds, 0, -1):
        for result in store.results(round_id):
            if result.uid == uid:
                return result
    return None


def _verdict(result) -> str:
    if result is None:
        return "not tested"
    return "verified" if result.ok else "failed"


def render_summary(summary: dict[str, Any], console: Console) -> None:
    table = Table(title=f"Scoreboard after {summary['rounds']} round(s), block {summary['block']}")
    for column in (
        "uid",
        "miner",
        "hotkey",
        "verdict",
        "device",
        "TFLOPS fp16",
        "TFLOPS fp32",
        "memory GB/s",
        "sustained",
        "score",
        "weight on chain",
    ):
        table.add_column(
            column, justify="right" if column not in ("miner", "hotkey", "verdict", "device") else "left"
        )
    for miner in summary["miners"]:
        table.add_row(
            str(miner["uid"]),
            miner["name"],
            miner["hotkey"][:12] + "…",
            miner["verdict"],
            miner["device"] or "-",
            _fmt(miner["tflops_fp16"]),
            _fmt(miner["tflops_fp32"]),
            _fmt(miner["memory_gbs"], 2),
            _fmt(miner["sustained_ratio"], 2),
            f"{miner['score']:.6f}",
            f"{miner['weight']:.4f}",
        )
    console.print(table)
    console.print(
        f"validator uid {summary['validator']['uid']} set weights on {summary['chain']}; "
        f"demo took {summary.get('elapsed_s', '?')} s"
    )


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
