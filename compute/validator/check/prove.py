"""The single-machine proof inside a validation lease, in lockstep with the round's window.

Prepare (untimed, each step bounded by seconds above the measured round trip): SSH and the worker,
then ``info`` twice (the devices, and the round trip of this session on the validator's clock).
Timed, at the window's gates: the memory proof first (every seat builds, then every chain starts at
the window's common moment; ``lockstep.residency`` judges that this machine's chain held its matrix
at that moment, else the test fails: one device cannot be proven for two seats), then the GEMM proof
and the other in-depth proofs in the same session. Used for a whole machine and for each host of a
multi-host miner.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

from compute.protocol import GpuSpec, MachineSpecs
from compute.validator.check.context import MinerCheck
from compute.validator.check.lease import Lease, open_session
from compute.validator.failures import MinerFailed
from compute.validator.lockstep.gate import MinerAbsent, SeatGate
from compute.validator.lockstep.residency import exclusivity, residency_of
from compute.validator.lockstep.window import Seat
from compute.validator.proofs.depth import DepthRejected, prove_memory
from compute.validator.proofs.depth_step import prove_depth
from compute.validator.proofs.distance import measure_round_trip
from compute.validator.proofs.evidence import Measured
from compute.validator.proofs.gemm import prove_gemm
from compute.validator.session.pog_session import PogSession, PogSessionError, WorkerTimeout
from compute.validator.session.worker_reply import DeviceInfo

MAX_GPUS_TESTED = 16
T = TypeVar("T")


async def bounded(step: Awaitable[T], seconds: float, what: str) -> T:
    """``step`` within its lockstep bound, else the miner is absent from the window."""
    try:
        return await asyncio.wait_for(step, seconds)
    except asyncio.TimeoutError:
        raise MinerAbsent(f"{what} took more than {seconds:.0f}s (lockstep bound): not ready") from None


async def measure_info(session: PogSession, check: MinerCheck) -> tuple[list[DeviceInfo], float]:
    """The worker's devices and the session's round trip, stamped by the timing process.

    The first ``info`` starts the worker's engine (torch, CUDA: bounded like the worker's start);
    the round trip is the fastest of a few pings (``proofs.distance``: it sizes the timed work and
    bounds the prepare steps; nothing is ever subtracted from a timing)."""
    lockstep, timeout = check.params.lockstep, check.params.miner_timeout
    devices = await bounded(session.info(timeout), check.bound(lockstep.bootstrap_s), "worker engine start")
    rtt = await bounded(measure_round_trip(session, timeout), check.bound(lockstep.step_s), "round trip")
    return devices, rtt


async def prove_in_lease(
    check: MinerCheck, lease: Lease, claimed: list[GpuSpec], specs: MachineSpecs, seat: Seat | None = None
) -> Measured:
    """What ``claimed`` proved in ``lease`` (``MinerFailed`` on a rejected or broken proof, or a
    machine absent at the window's moment)."""
    params, seat = check.params, seat or check.seat
    session = await bounded(
        open_session(lease, params, check.uid),
        check.bound(params.lockstep.bootstrap_s),
        "SSH and worker start",
    )
    async with session:
        try:
            devices, rtt = await measure_info(session, check)
            gpu_count = max(1, len(claimed))
            if claimed and len(devices) < gpu_count:
                raise MinerFailed(f"worker sees {len(devices)} devices, miner claims {gpu_count} GPUs")
            measured = Measured({}, {"rtt_s": rtt}, devices, gpu_count if claimed else 0)
            await _prove_memory_in_lockstep(check, session, claimed, measured, seat, rtt)
            measured, together = await prove_gemm(check, session, claimed, specs, measured)
            await prove_depth(check, session, claimed, specs, measured, together)
        except (PogSessionError, DepthRejected) as exc:
            raise MinerFailed(str(exc)) from None
        finally:
            if seat is not None:
                seat.leave()
    check.notes.gpu_uuids.update(measured.uuids)
    return measured


async def _prove_memory_in_lockstep(
    check: MinerCheck,
    session: PogSession,
    claimed: list[GpuSpec],
    measured: Measured,
    seat: Seat | None,
    rtt: float,
) -> None:
    """The memory proof at the window's gates, then the exclusivity judge on the validator's clock."""
    gate = SeatGate(seat) if seat is not None else None
    names = [gpu.name for gpu in claimed]
    started = time.monotonic()
    try:
        measured.memory = await prove_memory(check, session, names, max(1, measured.gpu_count), rtt, gate)
    except WorkerTimeout as exc:  # no pass in its bound after the window's start: not there then
        raise MinerAbsent(f"not present at the lockstep window's moment: {exc}") from None
    measured.timings["memory_s"] = time.monotonic() - started
    memory = measured.memory
    if seat is not None and memory is None:  # no memory proof (model not in the table): no seat
        seat.leave()
    if seat is None or memory is None or memory.started_at is None:
        return
    moment = seat.window.moment
    if moment is None:  # no seat started: cannot happen once this one did
        raise MinerAbsent("the window has no common moment")
    verdict = exclusivity(residency_of(memory, rtt, cpu=not claimed), moment, check.params.lockstep)
    measured.timings["lead_s"] = verdict.lead_s
    measured.timings["late_s"] = verdict.late_s
    measured.timings["allowance_s"] = verdict.bound_s
    measured.timings["rtt_after_s"] = memory.rtt_after_s
    measured.timings["start_skew_s"] = moment - memory.started_at
    if not verdict.ok:
        raise MinerFailed(f"not exclusively present at the lockstep window's moment: {verdict.reason}")


__all__ = ["MAX_GPUS_TESTED", "bounded", "prove_in_lease"]
