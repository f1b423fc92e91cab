"""Holistic hardware score: verified GPU throughput and memory (dominant) x host factor x rental.

    per GPU    s_g = weight(model) x (t_share x min(cap, tflops/expected) + m_share x mem_g)
               mem_g = min(cap, gbs/expected_gbs) when the memory proof passed, else 0
    gpu part   G = (sum of the best ``max_gpus_counted`` credited s_g) x sustained factor
    host       H = 1 + sum_k weight_k x min(1, value_k / cap_k)   (cpu cores, cpu GB/s, RAM, disk)
    total      G x H x (1 + rented_bonus if rented)

Inputs are what the validator verified and measured (``compute.pog`` memory, sustained, scaling,
host_probe); the weights and caps come from ``config/scoring.yaml``. Pure: no I/O except loading
that file, no clock, no identification.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compute.scoring.score import ScoringError

CONFIG_ENV_VAR = "COMPUTE_SCORING_CONFIG"
DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[2] / "config" / "scoring.yaml"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuPart(_Frozen):
    throughput_share: float = Field(default=0.7, ge=0, le=1)
    memory_share: float = Field(default=0.3, ge=0, le=1)
    ratio_cap: float = Field(default=1.1, ge=1, le=10)
    max_gpus_counted: int = Field(default=8, ge=1, le=4096)


class SustainedPart(_Frozen):
    tolerance: float = Field(default=0.1, ge=0, lt=1)
    floor: float = Field(default=0.0, ge=0, le=1)


class HostComponent(_Frozen):
    weight: float = Field(ge=0, le=1)
    cap: float = Field(gt=0)


class HostPart(_Frozen):
    cpu_cores: HostComponent = HostComponent(weight=0.04, cap=64)
    cpu_gbs: HostComponent = HostComponent(weight=0.03, cap=20.0)
    ram_gb: HostComponent = HostComponent(weight=0.04, cap=512)
    disk_gb: HostComponent = HostComponent(weight=0.04, cap=1000)


class HolisticConfig(_Frozen):
    version: int = 1
    gpu: GpuPart = GpuPart()
    sustained: SustainedPart = SustainedPart()
    host: HostPart = HostPart()
    rented_bonus: float = Field(default=0.1, ge=0, le=10)


def load_holistic_config(path: str | Path | None = None) -> HolisticConfig:
    """Load and validate the YAML (argument > $COMPUTE_SCORING_CONFIG > config/scoring.yaml)."""
    path = Path(path or os.environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return HolisticConfig.model_validate(raw or {})
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise ScoringError(f"{path}: {exc}") from exc


@dataclass(frozen=True)
class GpuEvidence:
    """One credited GPU: its identified model's weight and table figures, and what was measured."""

    weight: float
    tflops: float
    expected_tflops: float
    memory_proven: bool = False
    gbs: float = 0.0
    expected_gbs: float = 0.0


@dataclass(frozen=True)
class HostEvidence:
    cpu_cores: float = 0.0
    cpu_gbs: float = 0.0
    ram_gb: float = 0.0
    disk_gb: float = 0.0


@dataclass(frozen=True)
class HolisticScore:
    total: float
    gpu_part: float
    host_factor: float
    per_gpu: tuple[float, ...]
    sustained_factor: float


def _num(value: float) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else 0.0


def _ratio(measured: float, expected: float, cap: float) -> float:
    expected = _num(expected)
    return min(cap, _num(measured) / expected) if expected else 0.0


def gpu_value(gpu: GpuEvidence, config: HolisticConfig) -> float:
    part = config.gpu
    memory = _ratio(gpu.gbs, gpu.expected_gbs, part.ratio_cap) if gpu.memory_proven else 0.0
    return _num(gpu.weight) * (
        part.throughput_share * _ratio(gpu.tflops, gpu.expected_tflops, part.ratio_cap)
        + part.memory_share * memory
    )


def host_factor(host: HostEvidence, config: HolisticConfig) -> float:
    factor = 1.0
    for name in ("cpu_cores", "cpu_gbs", "ram_gb", "disk_gb"):
        component: HostComponent = getattr(config.host, name)
        factor += component.weight * min(1.0, _num(getattr(host, name)) / component.cap)
    return factor


def holistic_score(
    gpus: Sequence[GpuEvidence],
    host: HostEvidence,
    rented: bool,
    sustained_factor: float = 1.0,
    config: HolisticConfig | None = None,
) -> HolisticScore:
    """The machine score of one round (see the module docstring for the formula)."""
    config = config or HolisticConfig()
    per_gpu = tuple(gpu_value(g, config) for g in gpus)
    best = sorted(per_gpu, reverse=True)[: config.gpu.max_gpus_counted]
    sustain = max(config.sustained.floor, min(1.0, _num(sustained_factor)))
    gpu_part = math.fsum(best) * sustain
    factor = host_factor(host, config)
    total = gpu_part * factor * ((1.0 + config.rented_bonus) if rented else 1.0)
    return HolisticScore(total, gpu_part, factor, per_gpu, sustain)
