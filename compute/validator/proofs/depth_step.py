"""The in-depth step after the GEMM proof: multi-GPU scaling, sustained run and host probes.

Memory is proven every round before it (at the lockstep window's moment, ``check.prove``); scaling
with 2+ GPUs; the sustained run and the host probes (RAM, disk, CPU) on their cadence
(``sustained_due``), restarting when the GPU UUID set changed.
"""

from __future__ import annotations

import time

from compute.pog import Challenge, uuid_change
from compute.pog.sustained import reference_fraction_for
from compute.protocol import MachineSpecs
from compute.scoring import GpuTable, identify
from compute.validator.params import RoundParams
from compute.validator.proofs.checked import ProofCheck
from compute.validator.proofs.depth import (
    probe_host,
    prove_scaling,
    prove_sustained,
    sustained_due,
    write_disk,
)
from compute.validator.proofs.evidence import Measured
from compute.validator.proofs.sizing import expected_tflops
from compute.validator.session.pog_session import PogSession


def _segment_fraction(
    params: RoundParams, table: GpuTable, names: list[str], measured: Measured, cpu: bool
) -> float:
    """The calibrated segment/GEMM fraction of this miner's class: the largest among the models it
    claims and the one its measured throughput identifies (a claim can only raise it)."""
    found = identify(measured.tflops.get("fp16"), measured.tflops.get("fp32"), None, None, table)
    classes = [table.resolve_name(name) for name in names] + [found.model, "CPU" if cpu else None]
    part = params.holistic.sustained
    return reference_fraction_for(classes, part.reference_fractions, part.reference_fraction)


async def prove_depth(
    check: ProofCheck,
    session: PogSession,
    claimed: list,
    specs: MachineSpecs,
    measured: Measured,
    together: tuple[Challenge, float],
) -> None:
    """Scaling with 2+ GPUs; sustained and host probes on their cadence (memory: the lockstep step,
    before the GEMM proof)."""
    params, table, previous = check.params, check.table, check.previous
    depth, timeout, cpu = params.depth, params.miner_timeout, not claimed
    names = [gpu.name for gpu in claimed]
    count = max(1, measured.gpu_count)
    measured.uuids = tuple(d.uuid for d in measured.devices[:count] if d.uuid) if claimed else ()
    stored = previous.gpu_uuids if previous is not None and previous.gpu_uuids else None
    change = uuid_change(stored, measured.uuids)
    # a lease of some of the machine's GPUs (the rest rented): only a GPU never seen is a new machine
    partial = 0 < len(claimed) < len(specs.gpus)
    measured.history_reset = change.changed and (bool(change.added) or not partial)
    rtt, share = measured.timings.get("rtt_s", 0.0), params.distance_share
    if measured.gpu_count >= 2:
        started = time.monotonic()
        measured.scaling = await prove_scaling(
            session, together[0], together[1], measured.gpu_count, timeout, params.verify_workers
        )
        measured.timings["scaling_s"] = time.monotonic() - started
    last = None if previous is None or measured.history_reset else previous.depth_round
    if not (params.force_depth or sustained_due(params.round_id, last, depth.sustained_every)):
        return
    disk = await write_disk(session, cpu, depth, timeout)  # read back after the sustained run
    started = time.monotonic()
    expected = (
        measured.tflops["fp32"] if cpu else expected_tflops(table, specs, "fp16") or measured.tflops["fp16"]
    )
    gemm = measured.tflops["fp32" if cpu else "fp16"]  # this round's GEMM, the validator's clock
    reference = gemm * count * _segment_fraction(params, table, names, measured, cpu)
    width = min(together[0].m, together[0].p, 1024)  # CPU segments as wide as the GEMM round
    measured.sustained = await prove_sustained(
        session,
        expected,
        count,
        cpu,
        depth,
        timeout,
        reference,
        cpu_m=width,
        verify_workers=params.verify_workers,
    )
    measured.timings["sustained_s"] = time.monotonic() - started
    started = time.monotonic()
    measured.host = await probe_host(
        session, specs.cpu_cores, cpu, depth, timeout, disk, params.verify_workers, rtt, share
    )
    measured.timings["probes_s"] = time.monotonic() - started
    measured.depth_ran = True
