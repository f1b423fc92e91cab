"""A miner that refused a GPU validation lease for lack of capacity: prove the free GPUs, credit
the verified rentals.

Only GPUs held by leases whose renter signed the request, is a known party and whose SSH endpoint
answers with the lease's host key count as rented (``compute.validator.rentals.receipts``).

- Partly rented (r of the claimed GPUs verified as rented, some free): the validation lease asks for
  the other GPUs, which are proven as usual (``prove_in_lease``); each rented GPU adds the per-GPU
  value of the machine's last WHOLE verification, never more than a free GPU proved now, times
  (1 + rented bonus). The sum is the sample. A machine never verified whole gets nothing for its
  rented GPUs (a cheap card rented out beside proven ones must not be paid as those).
- Fully rented, or the free GPUs refused too: a CPU-only liveness lease proves the miner serves
  leases, NOT its GPUs, so the sample is the machine's last whole verification (with the rented
  bonus) times the verified fraction, decaying once too old.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from compute.protocol import GpuSpec, MachineSpecs
from compute.scoring import GpuTable, ScoringConfig
from compute.store import PogResult
from compute.validator.check.context import MinerCheck
from compute.validator.check.lease import check_liveness, leased
from compute.validator.check.prove import prove_in_lease
from compute.validator.failures import MinerFailed, MinerRented
from compute.validator.params import RoundParams
from compute.validator.rentals.receipts import Renters, check_rentals

log = logging.getLogger(__name__)


async def check_rented(
    check: MinerCheck, claimed: list[GpuSpec] | None = None, specs: MachineSpecs | None = None
) -> PogResult:
    """The miner refused a GPU lease: prove its free GPUs (``claimed`` less the verified rented
    ones) and credit the GPUs its verified rentals hold."""
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
    rented = min(rentals.rented_gpus, notes.claimed_gpus)
    free = (claimed or [])[: notes.claimed_gpus - rented]
    if free and specs is not None and not specs.hosts:
        try:
            async with leased(check, len(free)) as lease:
                measured = await prove_in_lease(check, lease, free, specs)
        except MinerRented:  # fewer free GPUs than it claims beside its rentals: rented credit only
            log.info("uid=%d refused a lease of its %d free GPUs too", check.uid, len(free))
        else:
            measured.timings["total_s"] = check.elapsed()
            return partly_rented_result(check, check.scored(measured), rented)
    if check.seat is not None:
        check.seat.leave()  # no GPU of it to prove at the lockstep window's moment
    async with leased(check, 0, note=False) as lease:
        await check_liveness(lease, params)
    return rented_result(check, fraction)


def per_gpu_value(result: PogResult | None) -> float:
    """The sample a verification earned per GPU it credited (0 without a verified result)."""
    if result is None or not result.ok or result.rented:
        return 0.0
    return max(0.0, result.sample) / max(1, result.credited_gpus or result.gpu_count or 1)


def partly_rented_result(check: MinerCheck, proven: PogResult, rented: int) -> PogResult:
    """The free GPUs' result (``proven``, this round) plus ``rented`` verified rented GPUs, each at
    min(the last whole verification's, a free GPU's now) value per GPU x (1 + rented bonus)."""
    if not proven.ok:
        return proven
    whole = check.whole
    each = min(per_gpu_value(whole), per_gpu_value(proven)) * (1.0 + check.scoring.rented_bonus)
    claimed = proven.gpu_count + rented
    reason = (
        f"partly rented: {proven.gpu_count} free GPU(s) proven, {rented} in verified leases credited"
        f" {each:.4g} each"
        if each > 0
        else f"partly rented: {proven.gpu_count} free GPU(s) proven; {rented} rented GPU(s) earn nothing"
        " until the whole machine has been verified once"
    )
    uuids = proven.gpu_uuids
    if whole is not None and set(uuids) <= set(whole.gpu_uuids):
        uuids = whole.gpu_uuids  # the free GPUs are some of the machine's: its set is unchanged
    return replace(
        proven,
        sample=proven.sample + rented * each,
        rented_fraction=rented / claimed,
        reasons=(reason, *proven.reasons),
        gpu_uuids=uuids,
    )


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
    target, params, previous = check.target, check.params, check.whole
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
