"""A miner that refused a GPU validation lease for lack of capacity: prove the free GPUs, credit
the verified rentals whose GPUs are proven there beside their tenants.

Only GPUs held by leases whose renter signed the request, is a known party and whose SSH endpoint
answers with the lease's host key count as rented (``compute.validator.rentals.receipts``), and of
those only the GPUs the round proves present in a lease beside their tenants (``check.beside``: a
small memory proof at the lockstep window's moment): a receipt proves a contract, not a GPU, and a
self-rental through a second coldkey passes every receipt check. A rented GPU absent from that
proof earns nothing; one present earns what the same GPU earns idle (its part of the machine's last
whole verification), times ``1 + rented_bonus`` (0 by default: no receipt shows that the rental cost
its renter something the miner cannot recycle to itself, so the bonus would pay self-rentals).

- Partly rented (r of the claimed GPUs verified as rented, some free): the validation lease asks for
  the other GPUs, which are proven as usual (``prove_in_lease``), while the rented ones are proven
  beside their tenants at the same moment; each rented GPU present adds the per-GPU value of the
  machine's last WHOLE verification, never more than a free GPU proved now. The sum is the sample.
  A machine never verified whole gets nothing for its rented GPUs (a cheap card rented out beside
  proven ones must not be paid as those).
- Fully rented, or the free GPUs refused too: the sample is the machine's last whole verification
  times the share of its GPUs present beside their tenants (the bonus on top), decaying once too
  old; none present is a failed round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace

from compute.protocol import GpuSpec, MachineSpecs
from compute.scoring import GpuTable, ScoringConfig
from compute.store import PogResult
from compute.validator.check.beside import Beside, RentedGpus, prove_beside, proven_models
from compute.validator.check.context import MinerCheck
from compute.validator.check.hosts import RentedHost
from compute.validator.check.lease import leased
from compute.validator.check.prove import prove_in_lease
from compute.validator.failures import MinerFailed, MinerRented
from compute.validator.lockstep.window import Seat
from compute.validator.params import RoundParams

log = logging.getLogger(__name__)


async def check_rented(
    check: MinerCheck,
    claimed: list[GpuSpec] | None = None,
    specs: MachineSpecs | None = None,
    hosts: list[RentedHost] | None = None,
) -> PogResult:
    """The miner refused a GPU lease: prove its free GPUs (``claimed`` less the verified rented
    ones) and, beside their tenants, the GPUs its verified rentals hold; credit those present.
    ``hosts``: a multi-host miner whose every host was refused as rented (each proved its rented
    GPUs beside their tenants already, at its own seat)."""
    notes = check.notes
    held = RentedGpus(check)
    rentals = await held.rentals()
    if rentals.fraction(notes.claimed_gpus) <= 0:
        why = f" ({rentals.rejected[0]})" if rentals.rejected else ""
        raise MinerFailed(f"refused validation with no_capacity while holding no verified lease{why}")
    if hosts is not None:
        beside = Beside(
            sum(h.beside.present for h in hosts), "; ".join(h.beside.reason for h in hosts if h.beside.reason)
        )
        return _rented(check, beside)
    rented = await held.take(notes.claimed_gpus)
    claimed = claimed or []
    free = claimed[: notes.claimed_gpus - rented]
    names = proven_models(check.whole, claimed[: notes.claimed_gpus], rented, check.table)
    seat = _fork(check.seat, f"uid {check.uid} beside its tenants")
    if check.seat is not None and seat is None:  # the window's first gate fell: too late to be there
        names = ()
    beside_task = asyncio.ensure_future(prove_beside(check, names, seat))
    try:
        proven = await _prove_free(check, free, specs)
        beside = await beside_task
    finally:
        if not beside_task.done():
            beside_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await beside_task
    if proven is not None:
        return partly_rented_result(check, proven, rented, beside)
    return _rented(check, beside)


def _rented(check: MinerCheck, beside: Beside) -> PogResult:
    """No free GPU proven: the rented ones present beside their tenants, or a failed round."""
    if beside.present <= 0:
        raise MinerFailed(beside.reason or "rented GPUs not proven beside their tenants")
    return rented_result(check, min(1.0, beside.present / max(1, check.notes.claimed_gpus)), beside)


def _fork(seat: Seat | None, name: str) -> Seat | None:
    """A seat of the test's window for the proof beside the tenants (None without a window, or once
    its first gate fell: then that proof is absent)."""
    if seat is None:
        return None
    try:
        return seat.fork(name)
    except RuntimeError:
        return None


async def _prove_free(check: MinerCheck, free: list[GpuSpec], specs: MachineSpecs | None) -> PogResult | None:
    """The free GPUs proven in a validation lease of their own (at the test's seat); None when there
    are none to prove, or the miner refused that lease too."""
    if free and specs is not None and not specs.hosts:
        try:
            async with leased(check, len(free)) as lease:
                measured = await prove_in_lease(check, lease, free, specs)
        except MinerRented:  # fewer free GPUs than it claims beside its rentals: rented credit only
            log.info("uid=%d refused a lease of its %d free GPUs too", check.uid, len(free))
        else:
            measured.timings["total_s"] = check.elapsed()
            return check.scored(measured)
    if check.seat is not None:
        check.seat.leave()  # no free GPU of it to prove at the lockstep window's moment
    return None


def per_gpu_value(result: PogResult | None) -> float:
    """The sample a verification earned per GPU it credited (0 without a verified result)."""
    if result is None or not result.ok or result.rented:
        return 0.0
    return max(0.0, result.sample) / max(1, result.credited_gpus or result.gpu_count or 1)


def partly_rented_result(check: MinerCheck, proven: PogResult, rented: int, beside: Beside) -> PogResult:
    """The free GPUs' result (``proven``, this round) plus the ``beside.present`` of ``rented``
    verified rented GPUs proven beside their tenants, each at min(the last whole verification's, a
    free GPU's now) value per GPU x (1 + rented bonus); an absent rented GPU adds nothing."""
    if not proven.ok:
        return proven
    whole = check.whole
    each = min(per_gpu_value(whole), per_gpu_value(proven)) * (1.0 + check.scoring.rented_bonus)
    claimed = proven.gpu_count + rented
    present = min(rented, beside.present)
    if each <= 0:
        reason = (
            f"partly rented: {proven.gpu_count} free GPU(s) proven; {rented} rented GPU(s) earn nothing"
            " until the whole machine has been verified once"
        )
    else:
        reason = (
            f"partly rented: {proven.gpu_count} free GPU(s) proven, {present} of {rented} in verified"
            f" leases proven beside their tenants, credited {each:.4g} each"
        )
    reasons = (reason, beside.reason) if beside.reason else (reason,)
    uuids = proven.gpu_uuids
    if whole is not None and set(uuids) <= set(whole.gpu_uuids):
        uuids = whole.gpu_uuids  # the free GPUs are some of the machine's: its set is unchanged
    return replace(
        proven,
        sample=proven.sample + present * each,
        rented_fraction=rented / claimed,
        reasons=(*reasons, *proven.reasons),
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


def rented_result(check: MinerCheck, fraction: float, beside: Beside) -> PogResult:
    """A rented machine whose ``fraction`` of GPUs was proven present beside their tenants."""
    target, params, previous = check.target, check.params, check.whole
    sample = rented_sample(previous, params.round_id, params, check.table, check.scoring) * fraction
    reason = (
        f"rented: {fraction:.0%} of GPUs in verified leases, proven there beside their tenants"
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
        reasons=(reason, beside.reason) if beside.reason else (reason,),
        models=previous.models if previous else (),
        gpu_count=previous.gpu_count if previous else 0,
        tflops_fp16=previous.tflops_fp16 if previous else None,
        tflops_fp32=previous.tflops_fp32 if previous else None,
        timings={"total_s": check.elapsed()},
        block=params.block,
        created=time.time(),
        rented_fraction=fraction,
    )
