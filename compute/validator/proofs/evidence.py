"""Turn what one validation lease proved into a ``PogResult``: identification and the holistic score.

``Measured`` collects the round's figures (GEMM throughput on the validator's clock, the devices the
worker reported, and the in-depth outcomes of ``compute.validator.proofs.depth``). ``scored_result``
names each device (``identify``; the memory size only when its proof passed), credits each counted
GPU with ``compute.scoring.value.gpu_credit`` of its PROVEN figures (``proven_gpus``: concurrent
GEMM throughput, proven memory size and bandwidth; nothing the worker reported) and returns the
holistic score to persist. Names, claimed models and alone answers never add credit. Sustained and host figures
not measured this round are carried forward from the miner's previous verified result, unless its
GPU UUID set changed (then nothing is carried: the history restarts).

Pure: no I/O, no clock except the result's creation time.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compute.pog import SustainedReport
from compute.scoring import (
    GpuTable,
    HostEvidence,
    ProvenGpu,
    gpu_credit,
    holistic_score,
    identify,
    value_shape,
)
from compute.store import PogResult
from compute.validator.proofs.depth import HostOutcome, MemoryOutcome, ScalingOutcome
from compute.validator.session.pog_session import DeviceInfo

if TYPE_CHECKING:
    from compute.validator.params import MinerTarget, RoundParams

UNIDENTIFIED = "unidentified"


@dataclass
class Measured:
    tflops: dict[str, float]
    timings: dict[str, float]
    devices: list[DeviceInfo]
    gpu_count: int  # claimed GPUs tested (0: a machine without GPUs, tested as one CPU device)
    memory: MemoryOutcome | None = None
    scaling: ScalingOutcome | None = None
    sustained: SustainedReport | None = None
    host: HostOutcome | None = None
    depth_ran: bool = False
    uuids: tuple[str, ...] = ()
    history_reset: bool = False
    reasons: list[str] = field(default_factory=list)


def _identify(measured: Measured, table: GpuTable) -> tuple[list[str], list[str]]:
    f16, f32 = measured.tflops.get("fp16"), measured.tflops.get("fp32")
    memory = measured.memory
    models: list[str] = []
    reasons: list[str] = []
    for i, device in enumerate(measured.devices[: max(1, measured.gpu_count)]):
        if measured.gpu_count == 0:
            hint = device.memory_bytes / 2**30 or None  # a CPU machine: identification ignores memory
        else:
            hint = memory.claimed_gb if memory is not None and memory.proven[i] else None
        found = identify(f16, f32, hint, device.name, table)
        models.append(found.label)
        reasons.extend(found.reasons[:1])
    return models, reasons


def proven_gpus(measured: Measured) -> list[ProvenGpu]:
    """Per tested device, what the validator proved: the concurrent GEMM throughput (every
    sub-challenge verified, one clock for all), and memory size and bandwidth where its proof passed."""
    f16, f32 = measured.tflops.get("fp16") or 0.0, measured.tflops.get("fp32") or 0.0
    memory = measured.memory
    gpus = []
    for i in range(max(1, measured.gpu_count)):
        proven = memory is not None and i < len(memory.proven) and bool(memory.proven[i])
        size = memory.claimed_gb if memory is not None and proven else 0.0
        gbs = memory.gbs[i] if memory is not None and proven and i < len(memory.gbs) else 0.0
        gpus.append(ProvenGpu(f16, f32, size, gbs))
    return gpus


def _credits(measured: Measured, table: GpuTable, params: RoundParams) -> list[float]:
    """Credit of every counted GPU (scaling may drop some and bounds how many count)."""
    shape = value_shape(params.holistic, params.depth.cpu_bandwidth_gbs)
    values = [gpu_credit(gpu, table, shape).value for gpu in proven_gpus(measured)]
    scaling = measured.scaling
    if scaling is None:
        return values
    counted = scaling.credit.counted or (True,) * len(values)
    kept = sorted((v for v, c in zip(values, counted, strict=False) if c), reverse=True)
    return kept[: scaling.credit.credited]


def _carried(measured: Measured, previous: PogResult | None, round_id: int) -> tuple:
    """(sustained ratio, sustained factor, host figures, depth round) measured now or carried forward."""
    if measured.depth_ran:
        report = measured.sustained
        assert report is not None  # depth_ran is set only after prove_sustained returned a report
        host = measured.host.figures if measured.host is not None else {}
        return report.ratio, report.factor, dict(host), round_id
    if previous is None or measured.history_reset or previous.depth_round is None:
        return None, None, {}, None
    return previous.sustained_ratio, previous.sustained_factor, dict(previous.host), previous.depth_round


def scored_result(
    target: MinerTarget, params: RoundParams, measured: Measured, table: GpuTable, previous: PogResult | None
) -> PogResult:
    models, reasons = _identify(measured, table)
    ratio, factor, host, depth_round = _carried(measured, previous, params.round_id)
    host_fields = {k: float(v) for k, v in host.items() if k in ("cpu_cores", "cpu_gbs", "ram_gb", "disk_gb")}
    score = holistic_score(
        _credits(measured, table, params),
        HostEvidence(**host_fields),
        rented=False,
        sustained_factor=1.0 if factor is None else factor,
        config=params.holistic,
    )
    memory, scaling = measured.memory, measured.scaling
    if memory is not None:
        reasons.extend(memory.reasons[:1])
    if measured.host is not None:
        reasons.extend(measured.host.reasons[:1])
    if scaling is not None and scaling.credit.credited < scaling.credit.claimed:
        reasons.append(
            f"credited {scaling.credit.credited} of {scaling.credit.claimed} GPUs "
            f"(delivered {scaling.credit.delivered:.2f})"
        )
    if measured.history_reset:
        reasons.append("GPU set changed: score history reset")
    gbs = [g for g in (memory.gbs if memory is not None else ()) if math.isfinite(g) and g > 0]
    return PogResult(
        round_id=params.round_id,
        uid=target.uid,
        hotkey=target.hotkey,
        ok=True,
        sample=score.total,
        reasons=tuple(dict.fromkeys(reasons)),
        models=tuple(models),
        tflops_fp16=measured.tflops.get("fp16"),
        tflops_fp32=measured.tflops.get("fp32"),
        gpu_count=measured.gpu_count,
        timings=measured.timings,
        block=params.block,
        created=time.time(),
        mem_gbs=statistics.median(gbs) if gbs else None,
        mem_proven_gb=memory.proven_gb if memory is not None else None,
        sustained_ratio=ratio,
        sustained_factor=factor,
        scaling_efficiency=scaling.efficiency if scaling is not None else None,
        credited_gpus=scaling.credit.credited if scaling is not None else measured.gpu_count,
        host=host,
        gpu_uuids=measured.uuids,
        depth_round=depth_round,
        history_reset=measured.history_reset,
    )
