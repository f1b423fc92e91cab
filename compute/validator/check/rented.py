"""A miner that refused a GPU validation lease for lack of capacity: credit only verified rentals.

Only GPUs held by leases whose renter signed the request, is a known party and whose SSH endpoint
answers with the lease's host key count as rented (``compute.validator.rentals.receipts``). A
CPU-only liveness lease proves the miner serves leases, NOT its GPUs, so the sample is the
machine's last verified score (with the rented bonus) times the verified fraction, decaying once
too old.
"""

from __future__ import annotations

import time

from compute.scoring import GpuTable, ScoringConfig
from compute.store import PogResult
from compute.validator.check.context import MinerCheck
from compute.validator.check.lease import check_liveness, leased
from compute.validator.failures import MinerFailed
from compute.validator.params import RoundParams
from compute.validator.rentals.receipts import Renters, check_rentals


async def check_rented(check: MinerCheck) -> PogResult:
    """The miner refused a GPU lease: credit only the GPUs its verified rentals hold."""
    target, params, notes = check.target, check.params, check.notes
    rentals = await check_rentals(
        check.client,
        target.endpoint,
        target.hotkey,
        Renters(params.trusted_renters, params.renter_coldkeys, params.own_canaries),
        time.time(),
        params.rental_probe_timeout,
    )
    notes.rentals = rentals
    for held in rentals.alive:
        notes.saw_lease(held.host, held.port, held.host_key)
    fraction = rentals.fraction(notes.claimed_gpus)
    if fraction <= 0:
        why = f" ({rentals.rejected[0]})" if rentals.rejected else ""
        raise MinerFailed(f"refused validation with no_capacity while holding no verified lease{why}")
    async with leased(check, 0, note=False) as lease:
        await check_liveness(lease, params)
    return rented_result(check, fraction)


def rented_sample(
    previous: PogResult | None, round_id: int, params: RoundParams, table: GpuTable, scoring: ScoringConfig
) -> float:
    """Score of a rented, live machine: its last verified (non-rented) sample x (1 + rented bonus),
    decaying by ``rented_decay`` per round once older than ``rented_max_age``; 0 if never verified."""
    if previous is None or not previous.ok or previous.rented:
        return 0.0
    age = round_id - previous.round_id
    score = max(0.0, previous.sample) * (1.0 + scoring.rented_bonus)
    return score * params.rented_decay ** max(0, age - params.rented_max_age)


def rented_result(check: MinerCheck, fraction: float = 1.0) -> PogResult:
    target, params, previous = check.target, check.params, check.previous
    sample = rented_sample(previous, params.round_id, params, check.table, check.scoring) * fraction
    reason = (
        f"rented: {fraction:.0%} of GPUs in verified leases, liveness only"
        if sample > 0
        else "rented: never verified, no score"
    )
    return PogResult(
        round_id=params.round_id,
        uid=target.uid,
        hotkey=target.hotkey,
        ok=True,
        sample=sample,
        rented=True,
        reasons=(reason,),
        models=previous.models if previous else (),
        gpu_count=previous.gpu_count if previous else 0,
        tflops_fp16=previous.tflops_fp16 if previous else None,
        tflops_fp32=previous.tflops_fp32 if previous else None,
        timings={"total_s": check.elapsed()},
        block=params.block,
        created=time.time(),
        rented_fraction=fraction,
    )
