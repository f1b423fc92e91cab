"""Holistic hardware score: verified GPU credit (dominant) x sustained factor x host factor x rental.

    per GPU    s_g = credit of its proven figures (``compute.scoring.value.gpu_credit``)
    gpu part   G = (sum of the best ``max_gpus_counted`` s_g over the credited GPUs) x sustained factor
    host       H = 1 + sum_k weight_k x min(1, value_k / cap_k)   (cpu cores, cpu GB/s, RAM, disk)
    total      G x H x (1 + rented_bonus if rented)

Inputs are what the validator verified and measured (``compute.pog`` memory, sustained, scaling,
host_probe); the weights and caps come from ``config/scoring.yaml``. Every factor is monotone in its
proven input and none can exceed its cap. Pure: no I/O except loading that file, no clock.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from compute.scoring.score import ScoringError
from compute.scoring.value import ValueShape

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
    # honest segment throughput / GEMM-round throughput (segments are narrower GEMMs): the reference
    # the last segments are compared with is GEMM x this, whatever the first segments did. Per class
    # (a table model name or CPU) where calibrated (`bench pog-depth --suite sustained`: segment_over_gemm); a
    # miner's class is the largest of its claimed and identified ones (compute.pog.sustained)
    reference_fraction: float = Field(default=0.8, gt=0, le=2)
    reference_fractions: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})

    @field_validator("reference_fractions")
    @classmethod
    def _fractions_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {name: f for name, f in value.items() if not (isinstance(f, (int, float)) and 0 < f <= 2)}
        if bad:
            raise ValueError(f"reference_fractions must be in (0, 2]: {bad}")
        return value


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


def value_shape(config: HolisticConfig, cpu_bandwidth_gbs: float = 0.1) -> ValueShape:
    """The value function's shares and cap from the config (``gpu`` section)."""
    part = config.gpu
    return ValueShape(part.throughput_share, part.memory_share, part.ratio_cap, cpu_bandwidth_gbs)


def host_factor(host: HostEvidence, config: HolisticConfig) -> float:
    factor = 1.0
    for name in ("cpu_cores", "cpu_gbs", "ram_gb", "disk_gb"):
        component: HostComponent = getattr(config.host, name)
        factor += component.weight * min(1.0, _num(getattr(host, name)) / component.cap)
    return factor


def holistic_score(
    credits: Sequence[float],
    host: HostEvidence,
    rented: bool,
    sustained_factor: float = 1.0,
    config: HolisticConfig | None = None,
) -> HolisticScore:
    """The machine score of one round from the per-GPU credits of the credited GPUs (module docstring).

    ``rented`` is an input (whether a verified lease holds the machine), not decided here."""
    config = config or HolisticConfig()
    per_gpu = tuple(_num(c) for c in credits)
    best = sorted(per_gpu, reverse=True)[: config.gpu.max_gpus_counted]
    sustain = max(config.sustained.floor, min(1.0, _num(sustained_factor)))
    gpu_part = math.fsum(best) * sustain
    factor = host_factor(host, config)
    total = gpu_part * factor * ((1.0 + config.rented_bonus) if rented else 1.0)
    return HolisticScore(total, gpu_part, factor, per_gpu, sustain)
