"""Value function: one GPU's credit from what the validator proved, capped by the GPU table.

    per model M   r_t = min(cap, p.fp16 / M.fp16, p.fp32 / M.fp32)     (proven fraction of its throughput)
                  r_b = min(cap, p.gbs / M.gbs)                          (proven fraction of its bandwidth)
                  v_M(p) = w_M x (t x r_t + m x min(r_t, r_b))
                  and v_M(p) = 0 unless p's proven memory covers M (p.memory_gb >= M.memory_gb x (1 - tol))
    CPU floor     v_cpu(p) = cpu_weight(p.fp32) x (t + m x min(cap, p.gbs / cpu_gbs))     (no memory needed)
    credit(p)     = max(v_cpu(p), max over M of v_M(p))

``p`` holds only quantities the validator measured on its own clock or proved by mathematics
(``ProvenGpu``): dense TFLOPS per precision, the memory size whose proof passed, the proven
bandwidth. Each v_M is monotone in every proven quantity (min, cap and a memory step), so their
maximum is too: proving more never lowers credit. The bandwidth part is paid at most at the
fraction of the model's throughput proven, so a slow GPU with fast memory (H20) is not paid a share
of a fast model's weight for its bandwidth alone. The table only caps: a GPU that proves less than a
model's figures is paid that model's weight times the fraction it proved, never a model's full
weight for landing near it, and a model is never credited before its memory size is proven. A
reported name, a claimed model, a tolerance window or a tie cannot enter: ``gpu_credit`` sees none
of them. Naming the GPU (``identify``) is separate and resolves ambiguity toward the lower weight.

Pure functions; no I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compute.scoring.identify import GpuModel, GpuTable


@dataclass(frozen=True)
class ValueShape:
    """How the proven figures are weighed (``config/scoring.yaml`` ``gpu``: shares and the cap)."""

    throughput_share: float = 0.7
    memory_share: float = 0.3
    ratio_cap: float = 1.1
    cpu_bandwidth_gbs: float = 0.1  # reference bandwidth of the CPU floor (the demo's CPU memory proof)


@dataclass(frozen=True)
class ProvenGpu:
    """What the validator proved about one GPU (0 = not proven / not measured)."""

    tflops_fp16: float = 0.0  # validator clock, verified GEMM, this GPU's concurrent share
    tflops_fp32: float = 0.0
    memory_gb: float = 0.0  # memory size whose residency proof passed (0: not proven)
    gbs: float = 0.0  # bandwidth timed by the memory proof (0: not proven)


@dataclass(frozen=True)
class GpuCredit:
    """The credit of one GPU and the table entry that capped it (None: the CPU floor or nothing)."""

    value: float
    credited_as: str | None


def _num(value: object) -> float:
    """Positive finite float, else 0 (NaN, inf, negatives, bools and non-numbers prove nothing)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0


def clean(gpu: ProvenGpu) -> ProvenGpu:
    """``gpu`` with every unusable figure replaced by 0."""
    return ProvenGpu(_num(gpu.tflops_fp16), _num(gpu.tflops_fp32), _num(gpu.memory_gb), _num(gpu.gbs))


def memory_covers(gpu: ProvenGpu, model: GpuModel, memory_tolerance: float) -> bool:
    """Whether the proven memory size is (within tolerance) at least the model's memory."""
    return _num(gpu.memory_gb) >= model.memory_gb * (1.0 - memory_tolerance)


def model_value(gpu: ProvenGpu, model: GpuModel, table: GpuTable, shape: ValueShape) -> float:
    """v_M(p): the model's weight times the capped fraction of its figures that ``gpu`` proved."""
    gpu = clean(gpu)
    if not memory_covers(gpu, model, table.memory_tolerance):
        return 0.0
    throughput = min(
        shape.ratio_cap, gpu.tflops_fp16 / model.tflops_fp16, gpu.tflops_fp32 / model.tflops_fp32
    )
    memory = min(throughput, gpu.gbs / model.bandwidth_gbs)  # bandwidth never pays beyond the compute proven
    return model.weight * (shape.throughput_share * throughput + shape.memory_share * memory)


def cpu_value(gpu: ProvenGpu, table: GpuTable, shape: ValueShape) -> float:
    """The CPU-class floor: paid per proven fp32 TFLOPS (capped by the table's CPU ceiling)."""
    gpu = clean(gpu)
    if gpu.tflops_fp32 <= 0:
        return 0.0
    memory = min(shape.ratio_cap, gpu.gbs / shape.cpu_bandwidth_gbs) if shape.cpu_bandwidth_gbs > 0 else 0.0
    weight = table.cpu_fallback.weight(gpu.tflops_fp32)
    return weight * (shape.throughput_share + shape.memory_share * memory)


def gpu_credit(gpu: ProvenGpu, table: GpuTable, shape: ValueShape | None = None) -> GpuCredit:
    """credit(p) = the best of the CPU floor and every model's v_M(p); ties keep the lower weight."""
    shape = shape or ValueShape()
    best = GpuCredit(cpu_value(gpu, table, shape), None)
    for name, model in sorted(table.models.items(), key=lambda item: (item[1].weight, item[0])):
        value = model_value(gpu, model, table, shape)
        if value > best.value:
            best = GpuCredit(value, name)
    return best


def table_figures(model: GpuModel) -> ProvenGpu:
    """The point a GPU proving exactly the table's figures of ``model`` would reach."""
    return ProvenGpu(model.tflops_fp16, model.tflops_fp32, model.memory_gb, model.bandwidth_gbs)


__all__ = [
    "GpuCredit",
    "ProvenGpu",
    "ValueShape",
    "clean",
    "cpu_value",
    "gpu_credit",
    "memory_covers",
    "model_value",
    "table_figures",
]
