"""The demo's scoreboard: what the validator concluded (its store) and what the chain holds (weights).

Reads only; the numbers come from the validator's own SQLite state and the simulated chain, so
the scoreboard shows exactly what a validator on a real network would have written.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compute.chain import connect
from compute.scoring import DEFAULT_WINDOW
from compute.store import ValidatorStore
from compute.validator.round.loop import stored_shares

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
        shares = stored_shares(store, DEFAULT_WINDOW) or {}
        checks = store.presence_count()
        miners = []
        for miner in net.miners + net.cheaters:
            hotkey = miner.wallet.hotkey.ss58_address
            result = _latest_result(store, miner.uid, rounds)
            score = scores.get(miner.uid)
            samples = [r.sample for k in range(1, rounds + 1) for r in store.results(k) if r.uid == miner.uid]
            share = shares.get(hotkey, 0.0)
            miners.append(
                {
                    "name": miner.name,
                    "role": "cheater" if miner in net.cheaters else "honest",
                    "uid": miner.uid,
                    "hotkey": hotkey,
                    "verdict": _verdict(result),
                    "reasons": list(result.reasons) if result else [],
                    "device": ", ".join(sorted(set(result.models))) if result and result.models else None,
                    "tflops_fp16": result.tflops_fp16 if result else None,
                    "tflops_fp32": result.tflops_fp32 if result else None,
                    "memory_gbs": result.mem_gbs if result else None,
                    "sustained_ratio": result.sustained_ratio if result else None,
                    "sustained_factor": result.sustained_factor if result else None,
                    "availability": result.availability if result else None,
                    "shared_with": list(result.shared_with) if result else [],
                    "score": score.score if score else 0.0,
                    "presence": share,
                    "credit": (score.score if score else 0.0) * share,
                    "capacity": max(samples, default=0.0),
                    "credited_hosts": sum(1 for v in (result.hosts.values() if result else ()) if v > 0),
                    "weight": weights.get(miner.uid, 0.0),
                }
            )
        return {
            "netuid": NETUID,
            "chain": str(net.chain_path),
            "validator": {"uid": net.validator.uid, "hotkey": net.validator.wallet.hotkey.ss58_address},
            "rounds": rounds,
            "presence_checks": checks,
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
    first = result.reasons[0] if result.reasons else ""
    if first.startswith("shared device"):
        return first.split(" (")[0]  # "shared device: same machine as uid N"
    if result.rented:
        return "rented (verified lease)"
    if not result.ok and "own coldkey" in first:
        return "self-rental: its own coldkey's lease is no rental"
    if not result.ok and "no verified lease" in first:
        return "refused rentals, no verified lease"
    if not result.ok and ("lockstep" in first or "not ready" in first):
        return "absent at the lockstep window's moment"
    if not result.ok:
        return "failed"
    if any("credited once, here" in reason for reason in result.reasons):
        return "verified (device credited once)"
    return "verified"


def summary_problems(summary: dict[str, Any], rounds_wanted: int) -> list[str]:
    """Why the demo did not do what it promised (empty when every miner was verified and weighted)."""
    problems = []
    if summary["rounds"] < rounds_wanted:
        problems.append(f"the validator finished {summary['rounds']} of {rounds_wanted} round(s)")
    for miner in summary["miners"]:
        if not miner["verdict"].startswith("verified") and miner.get("role", "honest") == "honest":
            reason = f": {miner['reasons'][0]}" if miner["reasons"] else ""
            problems.append(f"{miner['name']} (uid {miner['uid']}) {miner['verdict']}{reason}")
    problems += _cheater_problems(
        [m for m in summary["miners"] if m.get("role") == "cheater"],
        summary["rounds"],
        summary.get("presence_checks", 0),
    )
    if not summary["weights_on_chain"]:
        problems.append("no weights were written on chain")
    return problems


LEGEND = (
    "TFLOPS, memory GB/s: measured on the validator's clock (on this demo a CPU stands in for a GPU)",
    "sustained: throughput over the last fifth of a long run ÷ over its first fifth; above 1 the run "
    "sped up as it warmed (never rewarded); below 0.90 the machine throttled and its GPU score is "
    'multiplied by the factor shown ("throttled ×F"); "-": not measured this round',
    "score: moving average of the round samples; presence: share of the validator's presence checks "
    "(a round over every miner at one moment is one) that found the miner's device there; weight on "
    "chain: each score x presence's share of the total",
)


def _cheater_problems(cheaters: list[dict[str, Any]], rounds: int = 1, checks: int = 0) -> list[str]:
    """``--cheaters``: none earns more than its device's honest share. The refuser earns nothing;
    the box shared by two hotkeys earns exactly once; the canary-aware miner, which turns real
    renters away, keeps less than its full availability after two rounds of canaries (signed by
    operator identities on coldkeys no validator holds); the self-renter never earns rented credit from its own coldkey's lease; the three
    sybils on one device earn together at most that device's credit (its best proven sample x a
    presence share of 1); the device listed as three hosts is credited as at most one host; the
    hit-and-run, there for its first test only, earns at most its device's credit for that share of
    the presence checks."""
    problems = []
    sybils = [m for m in cheaters if m["name"].startswith("sybil-")]
    device = max((m["capacity"] for m in sybils), default=0.0)
    if sybils and sum(m["credit"] for m in sybils) > 1.05 * device + 1e-12:
        total = sum(m["credit"] for m in sybils)
        problems.append(
            f"the {len(sybils)} sybils on one device earned {total:.3g}, more than the device's {device:.3g}"
        )
    for miner in cheaters:
        if miner["name"] == "refuser" and (miner["weight"] > 0 or miner["score"] > 0):
            problems.append(f"refuser (uid {miner['uid']}) earned while refusing every rental")
        if miner["name"] == "canary-aware" and rounds >= 2 and (miner["availability"] or 0) >= 1:
            problems.append(
                f"canary-aware (uid {miner['uid']}) kept full availability while refusing renters"
            )
        if miner["name"] == "self-renter" and miner["verdict"].startswith("rented"):
            problems.append(f"self-renter (uid {miner['uid']}) was credited a rental to its own coldkey")
        if miner["name"] == "hosts-dup" and miner["credited_hosts"] > 1:
            problems.append(
                f"hosts-dup (uid {miner['uid']}): one device credited as {miner['credited_hosts']} hosts"
            )
        there = 1.0 / max(1, checks)  # its device was there at the first check only
        if miner["name"] == "hit-and-run" and miner["credit"] > 1.05 * miner["capacity"] * there + 1e-12:
            problems.append(
                f"hit-and-run (uid {miner['uid']}) earned {miner['credit']:.3g}, more than its device for "
                f"{there:.0%} of the checks ({miner['capacity'] * there:.3g})"
            )
    box = [m for m in cheaters if m["name"].startswith("box-")]
    credited = [m for m in box if m["weight"] > 0]
    if box and len(credited) != 1:
        problems.append(f"the box shared by {len(box)} hotkeys was credited {len(credited)} times, not once")
    return problems


def render_summary(summary: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"Scoreboard after {summary['rounds']} round(s), block {summary['block']}",
    )
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
        "presence",
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
            _sustained(miner),
            f"{miner['score']:.6f}",
            f"{miner.get('presence', 0.0):.2f}",
            f"{miner['weight']:.4f}",
        )
    console.print(table)
    for line in LEGEND:
        console.print(f"  {line}", style="dim", highlight=False, soft_wrap=True)
    problems = summary.get("problems") or []
    for problem in problems:
        console.print(f"[red]FAILED[/red] {escape(problem)}", highlight=False)
    weights = "set weights" if summary["weights_on_chain"] else "set NO weights"
    verdict = f"[red]demo failed ({len(problems)} problem(s))[/red]" if problems else "[green]demo OK[/green]"
    console.print(
        f"{verdict}: validator uid {summary['validator']['uid']} {weights} on {summary['chain']}; "
        f"demo took {summary.get('elapsed_s', '?')} s"
    )


def _sustained(miner: dict[str, Any]) -> str:
    ratio = miner["sustained_ratio"]
    if ratio is None:
        return "-"
    factor = miner.get("sustained_factor")
    if factor is not None and factor < 1.0:
        return f"{ratio:.2f} throttled ×{factor:.2f}"
    return f"{ratio:.2f}"


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
