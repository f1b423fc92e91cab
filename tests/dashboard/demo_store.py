"""A validator store of five demo miners, written through the real ValidatorStore API, each round's
sample built by the real scoring functions (value function, holistic score, rental factors, EMA).

Used by the worked example's test (docs/identification-and-scoring.md shows miner uid 2's page),
the dashboard's browser checks and the screenshots in docs/img/:

- uid 1 "fast": two H100 SXM at the table's figures, unthrottled, but it refused half the
  validator's canary rentals (availability x0.5): it earns less than uid 2;
- uid 2 "throttled": two H100 SXM at 90 % of the table's fp16, throttling (sustained factor 0.85)
  from round 6 on, absent at two of the presence checks: the worked example;
- uid 3: one of its two GPUs in a verified lease at the last round, both rented at the presence check after it;
- uid 4: its last round failed (a product mismatch);
- uid 5: tested in the first round only, over an hour ago (stale).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bittensor.sp_core import Keypair

from compute.protocol import Price
from compute.scoring import (
    HolisticConfig,
    HostEvidence,
    ProvenGpu,
    ScoringConfig,
    gpu_credit,
    holistic_score,
    load_gpu_table,
    update_score,
    value_shape,
)
from compute.store import Offer, PogResult, PresenceEntry, ScoreUpdate, ValidatorStore

ROUNDS = 8
ROUND_S = 600.0
HOST = {"cpu_cores": 32.0, "cpu_gbs": 8.0, "ram_gb": 256.0, "disk_gb": 800.0}
SCORING = ScoringConfig()


def hotkey(uid: int) -> str:
    return Keypair.create_from_uri(f"//DemoMiner{uid}").ss58_address


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def h100_pair(
    round_id: int, uid: int, fp16: float, sustained: float, availability: float, at: float, gpus: int = 2
) -> PogResult:
    """``gpus`` H100 SXM proving ``fp16`` TFLOPS each, their sample as the validator computes it."""
    table, holistic = load_gpu_table(), HolisticConfig()
    proven = ProvenGpu(fp16, 46.3, 80.0, 3350.0)
    credit = gpu_credit(proven, table, value_shape(holistic)).value
    score = holistic_score([credit] * gpus, HostEvidence(**HOST), rented=False, sustained_factor=sustained)
    reasons = (f"availability x{availability:.2f} (canary rentals)",) if availability < 1 else ()
    return PogResult(
        round_id,
        uid,
        hotkey(uid),
        ok=True,
        sample=score.total * availability,
        reasons=reasons,
        models=("H100 SXM",) * gpus,
        tflops_fp16=fp16,
        tflops_fp32=46.3,
        gpu_count=gpus,
        created=at,
        mem_gbs=3350.0,
        mem_proven_gb=80.0,
        sustained_ratio=round(0.9 * sustained, 3) if sustained < 1 else 1.02,
        sustained_factor=sustained,
        credited_gpus=gpus,
        host=HOST,
        depth_round=1,
        availability=availability,
        rental_uptime=1.0,
    )


def round_results(round_id: int, at: float, last: bool) -> list[PogResult]:
    results = [
        h100_pair(round_id, 1, 513.0, 1.0, 0.5, at),
        h100_pair(
            round_id, 2, 513.0 * 0.9, 0.85 if round_id >= 6 else 1.0, 1.0, at
        ),  # throttles from round 6
    ]
    three = h100_pair(round_id, 3, 500.0, 1.0, 1.0, at)
    if last:  # one GPU in a verified lease: the free one proven, the rented one credited as much (bonus 0)
        free = h100_pair(round_id, 3, 500.0, 1.0, 1.0, at, gpus=1)
        three = replace(
            free,
            sample=free.sample * (1 + (1 + SCORING.rented_bonus)),
            rented_fraction=0.5,
            reasons=(
                "partly rented: 1 free GPU(s) proven, 1 of 1 in verified leases proven beside their tenants",
            ),
        )
    results.append(three)
    four = h100_pair(round_id, 4, 480.0, 1.0, 1.0, at)
    if last:
        four = replace(four, ok=False, sample=0.0, reasons=("fp16 product mismatch at row 1873",))
    results.append(four)
    if round_id == 1:  # then it went away
        results.append(h100_pair(round_id, 5, 505.0, 1.0, 1.0, at))
    return results


def build_demo_store(path: Path, now: float) -> Path:
    """The store at ``path``: eight rounds ten minutes apart, the newest finished nine minutes before
    ``now``, a presence check two minutes after each round."""
    clock = Clock(now - ROUNDS * ROUND_S)
    store = ValidatorStore(path, clock=clock)
    store.sync_miners((uid, hotkey(uid)) for uid in range(1, 6))
    scores: dict[int, float] = {}
    for index in range(ROUNDS):
        last = index == ROUNDS - 1
        rnd = store.begin_round(block=1000 + 50 * index)
        results = round_results(rnd.round_id, clock.now, last)
        for result in results:
            store.record_result(result)
        updates = []
        for result in results:
            scores[result.uid] = update_score(scores.get(result.uid), result.sample, SCORING)
            updates.append(ScoreUpdate(result.uid, result.hotkey, scores[result.uid]))
        tested = {r.uid for r in results}
        for uid in set(scores) - tested:  # missed: the decay
            scores[uid] *= SCORING.missed_decay
            updates.append(ScoreUpdate(uid, hotkey(uid), scores[uid]))
        clock.now += 60
        store.finish_round(rnd.round_id, updates)
        total = sum(scores.values())
        store.log_weights(1000 + 50 * index, {u: s / total for u, s in scores.items()}, 1, True)
        # a presence check half-way to the next round: uid 2 missed two of them
        present = {1: 1.0, 2: 1.0 if index not in (1, 3) else 0.0, 3: 1.0, 4: 1.0}
        entries = [PresenceEntry(u, hotkey(u), f, "present" if f else "absent") for u, f in present.items()]
        if last:
            entries[2] = PresenceEntry(3, hotkey(3), 1.0, "2 rented GPU(s) present beside their tenants")
        store.record_presence("presence", entries, at=clock.now + 120)
        clock.now += ROUND_S - 60
    # what canaries' looks heard (the feed's price and free-now): uid 1 free at $2.49/GPU-h,
    # uid 3 one lease of two GPUs a minute ago, uid 2 names no price
    price = Price(base_hour=0.05, gpu_hour={"NVIDIA H100 80GB HBM3": 2.49}).model_dump_json()
    store.record_offer(1, hotkey(1), Offer(now - 240, price, free_gpus=2, active_leases=0))
    store.record_offer(3, hotkey(3), Offer(now - 60, price, free_gpus=0, active_leases=1))
    store.record_offer(2, hotkey(2), Offer(now - 300, None, free_gpus=2, active_leases=0))
    store.close()
    return path


__all__ = ["build_demo_store", "hotkey"]
