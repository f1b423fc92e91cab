"""GPU identification: name a GPU model from throughput the validator measured itself.

What it does:
- loads and validates the GPU table (``config/gpu_performance.yaml``) into a frozen ``GpuTable``;
- ``identify()`` NAMES a GPU: it matches measured fp16 / fp32 TFLOPS against the table in
  log-ratio distance with a tolerance. A proven memory size drops every candidate it does not cover
  and separates candidates whose throughput is indistinguishable (A100 40 GB vs 80 GB); whatever
  stays ambiguous resolves toward the LOWER weight, and a reported name can only pick among
  candidates of that same lowest weight. Throughput far below or above every model gives
  "unidentified"; CPU-class throughput gives the table's ``cpu_fallback`` model ("CPU").

The name pays nothing by itself: credit is ``compute.scoring.value`` of the proven figures.
What it deliberately does not do: measure anything, talk to a GPU, or trust a miner's figures.
The caller passes the validator's own measurements; this module is pure (except table loading).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

logger = logging.getLogger(__name__)

UNIDENTIFIED = "unidentified"
TABLE_ENV_VAR = "COMPUTE_GPU_TABLE"
DEFAULT_TABLE_PATH = Path(__file__).resolve().parents[2] / "config" / "gpu_performance.yaml"
_PRECISIONS = ("fp16", "fp32")
_NAME_PREFIXES = ("nvidia ", "geforce ")


class GpuTableError(ValueError):
    """The GPU table file is missing, not YAML, or fails validation (message names file and field)."""


def normalise_name(name: str) -> str:
    """Lower-case, collapse whitespace, drop leading "NVIDIA " / "GeForce " (device-name matching)."""
    text = " ".join(name.replace("_", " ").split()).lower()
    changed = True
    while changed:
        changed = False
        for prefix in _NAME_PREFIXES:
            if text.startswith(prefix):
                text, changed = text[len(prefix) :], True
    return text


class GpuModel(BaseModel):
    """One GPU model's expected figures (see the YAML header for the meaning of each field)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    display_name: str = Field(min_length=1, max_length=200)
    aliases: tuple[str, ...] = ()
    tflops_fp16: float = Field(gt=0, lt=1e5)
    tflops_fp32: float = Field(gt=0, lt=1e5)
    memory_gb: float = Field(gt=0, lt=1e5)
    bandwidth_gbs: float = Field(gt=0, lt=1e6)
    weight: float = Field(ge=0, lt=1e4)

    def tflops(self, precision: str) -> float:
        return self.tflops_fp16 if precision == "fp16" else self.tflops_fp32


def dominates(big: GpuModel, small: GpuModel) -> bool:
    """Whether ``big`` is at least ``small`` in every figure the validator can prove."""
    return (
        big.tflops_fp16 >= small.tflops_fp16
        and big.tflops_fp32 >= small.tflops_fp32
        and big.memory_gb >= small.memory_gb
        and big.bandwidth_gbs >= small.bandwidth_gbs
    )


class CpuFallback(BaseModel):
    """How a CPU-class device is identified and weighted (the local demo runs PoG on CPUs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(default="CPU", min_length=1, max_length=64)
    max_tflops_fp32: float = Field(default=5.0, gt=0)
    max_tflops_fp16: float = Field(default=5.0, gt=0)
    weight_per_tflops: float = Field(default=0.01, ge=0)
    min_weight: float = Field(default=0.0001, ge=0)

    def weight(self, tflops_fp32: float | None) -> float:
        """``max(min_weight, weight_per_tflops x tflops_fp32)``; ``min_weight`` when unknown."""
        if tflops_fp32 is None or not math.isfinite(tflops_fp32) or tflops_fp32 <= 0:
            return self.min_weight
        return max(self.min_weight, self.weight_per_tflops * min(tflops_fp32, self.max_tflops_fp32))


class GpuTable(BaseModel):
    """The validated GPU table: models keyed by canonical name, plus matching tolerances."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(ge=1)
    throughput_tolerance: float = Field(default=0.25, gt=0, lt=1)
    tie_margin: float = Field(default=0.5, ge=0, le=10)
    memory_tolerance: float = Field(default=0.10, gt=0, lt=1)
    memory_hint_weight: float = Field(default=0.5, ge=0, le=100)
    models: dict[str, GpuModel] = Field(min_length=1)
    cpu_fallback: CpuFallback = CpuFallback()

    @model_validator(mode="after")
    def _names_unique(self) -> GpuTable:
        owner: dict[str, str] = {}
        for key, model in self.models.items():
            if not key.strip():
                raise ValueError("model names must not be empty")
            for name in {key, model.display_name, *model.aliases}:
                norm = normalise_name(name)
                if owner.get(norm, key) != key:
                    raise ValueError(
                        f"name {name!r} of model {key!r} is already used by model {owner[norm]!r}"
                    )
                owner[norm] = key
        if normalise_name(self.cpu_fallback.model) in owner:
            raise ValueError(f"cpu_fallback.model {self.cpu_fallback.model!r} collides with a GPU model name")
        return self

    @model_validator(mode="after")
    def _weights_monotone(self) -> GpuTable:
        """A model whose figures are all >= another's must not weigh less (capability order)."""
        for big_name, big in self.models.items():
            for small_name, small in self.models.items():
                if big_name != small_name and dominates(big, small) and big.weight < small.weight:
                    raise ValueError(
                        f"weight of {big_name!r} ({big.weight}) is below that of {small_name!r} "
                        f"({small.weight}), whose figures are all lower or equal"
                    )
        return self

    def resolve_name(self, name: str | None) -> str | None:
        """Canonical model for a reported device name (key, display name or alias), else None."""
        if not name or not isinstance(name, str):
            return None
        norm = normalise_name(name)
        for key, model in self.models.items():
            if norm in {normalise_name(n) for n in (key, model.display_name, *model.aliases)}:
                return key
        return None

    def weight_of(self, model: str | None, tflops_fp32: float | None = None) -> float:
        """Scoring weight of one device: table weight, CPU fallback weight, or 0 (unidentified/unknown)."""
        if model is None or model == UNIDENTIFIED:
            return 0.0
        if model == self.cpu_fallback.model:
            return self.cpu_fallback.weight(tflops_fp32)
        entry = self.models.get(model)
        return entry.weight if entry is not None else 0.0


def load_gpu_table(path: str | os.PathLike[str] | None = None) -> GpuTable:
    """Load and validate the GPU table; ``path`` > ``$COMPUTE_GPU_TABLE`` > the repo's config file.

    Raises ``GpuTableError`` with the file and the offending field on any problem.
    """
    source = Path(path or os.environ.get(TABLE_ENV_VAR) or DEFAULT_TABLE_PATH)
    try:
        raw: Any = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GpuTableError(f"cannot read GPU table {source}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise GpuTableError(f"GPU table {source} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise GpuTableError(f"GPU table {source} must be a mapping at top level, got {type(raw).__name__}")
    try:
        table = GpuTable.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise GpuTableError(f"GPU table {source} is invalid: {problems}") from exc
    logger.debug("loaded GPU table path=%s models=%d", source, len(table.models))
    return table


_CACHE: dict[tuple[str, int], GpuTable] = {}


def _default_table() -> GpuTable:
    """``load_gpu_table()`` cached per (path, modification time): edits are picked up, reloads are not repeated."""
    source = Path(os.environ.get(TABLE_ENV_VAR) or DEFAULT_TABLE_PATH)
    try:
        key = (str(source), source.stat().st_mtime_ns)
    except OSError:
        return load_gpu_table(source)  # raises GpuTableError with the reason
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = load_gpu_table(source)
    return _CACHE[key]


@dataclass(frozen=True)
class Candidate:
    """One model considered by ``identify``: its fit in tolerance units (0 = exact, 1 = edge)."""

    model: str
    throughput_distance: float  # RMS over measured precisions of |ln(measured/expected)| / ln(1+tol)
    memory_distance: float | None  # |ln(memory/expected)| / ln(1+memory_tol); None without memory
    score: float  # throughput_distance + memory_hint_weight * memory_distance (lower is better)


@dataclass(frozen=True)
class Identification:
    """The verdict: ``model`` is a canonical table name, the CPU fallback name, or None (unidentified)."""

    model: str | None
    confidence: float  # 0..1
    reasons: tuple[str, ...]
    candidates: tuple[Candidate, ...] = ()  # models within tolerance, best first
    weight: float = 0.0  # per-device scoring weight (table weight, CPU weight, or 0)

    @property
    def identified(self) -> bool:
        return self.model is not None

    @property
    def label(self) -> str:
        return self.model if self.model is not None else UNIDENTIFIED


def _unidentified(*reasons: str) -> Identification:
    return Identification(model=None, confidence=0.0, reasons=tuple(reasons))


def _check_throughput(label: str, value: float | None) -> str | None:
    """Return a reason when a throughput figure is unusable (None is allowed: not measured)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{label} must be a number, got {type(value).__name__}"
    if not math.isfinite(value):
        return f"{label} is not finite ({value})"
    if value <= 0:
        return f"{label} must be positive, got {value}"
    return None


def _usable_memory(memory_gb: float | None, reasons: list[str]) -> float | None:
    if memory_gb is None:
        return None
    if (
        isinstance(memory_gb, bool)
        or not isinstance(memory_gb, (int, float))
        or not math.isfinite(memory_gb)
        or memory_gb <= 0
    ):
        reasons.append(f"memory hint {memory_gb!r} ignored: not a positive finite number")
        return None
    return float(memory_gb)


def _fits(measured: dict[str, float], table: GpuTable) -> dict[str, tuple[float, float]]:
    """Per model: (RMS distance, worst per-precision distance), both in tolerance units."""
    unit = math.log1p(table.throughput_tolerance)
    fits: dict[str, tuple[float, float]] = {}
    for key, model in table.models.items():
        zs = [abs(math.log(value) - math.log(model.tflops(p))) / unit for p, value in measured.items()]
        fits[key] = (math.sqrt(sum(z * z for z in zs) / len(zs)), max(zs))
    return fits


def _no_match(measured: dict[str, float], table: GpuTable) -> Identification:
    """Explain why nothing matched; CPU-class throughput becomes the CPU fallback model."""
    cpu = table.cpu_fallback
    fp32, fp16 = measured.get("fp32"), measured.get("fp16")
    if fp32 is not None and fp32 < cpu.max_tflops_fp32 and (fp16 is None or fp16 < cpu.max_tflops_fp16):
        return Identification(
            model=cpu.model,
            confidence=1.0,
            reasons=(
                f"CPU-class throughput (fp32 {fp32:.3g} TFLOPS < {cpu.max_tflops_fp32:g}): no GPU matches",
            ),
            weight=cpu.weight(fp32),
        )
    slack = 1.0 + table.throughput_tolerance
    shown = ", ".join(f"{p} {v:.4g} TFLOPS" for p, v in measured.items())
    for p, value in measured.items():
        fastest = max(m.tflops(p) for m in table.models.values())
        if value > fastest * slack:
            return _unidentified(
                f"measured {shown}: {p} faster than every known model (max {fastest:g}): suspicious"
            )
    if all(value < min(m.tflops(p) for m in table.models.values()) / slack for p, value in measured.items()):
        return _unidentified(f"measured {shown}: slower than every model in the table")
    return _unidentified(
        f"measured {shown}: no model within ±{table.throughput_tolerance:.0%} on every precision"
    )


def identify(
    tflops_fp16: float | None,
    tflops_fp32: float | None,
    memory_gb: float | None = None,
    reported_name: str | None = None,
    table: GpuTable | None = None,
) -> Identification:
    """Identify a GPU model from the validator's own throughput measurements.

    Never raises on bad measurements (they give "unidentified" with a reason); without ``table`` the
    default table is loaded (cached), which raises ``GpuTableError`` if that file is broken.

    1. Candidates: models within ×/÷(1 + throughput_tolerance) on every measured precision whose
       memory the proven ``memory_gb`` covers (all of them when no memory was proven).
    2. Indistinguishable: candidates within ``tie_margin`` (RMS tolerance units) of the best fit.
    3. Among those, memory adds ``memory_hint_weight`` × memory distance to the fit.
    4. Candidates within ``tie_margin`` of the best score are ambiguous: the LOWEST weight is named;
       a reported name may only pick another candidate of that same weight.
    """
    table = table or _default_table()
    problems = [
        r
        for r in (
            _check_throughput("fp16 TFLOPS", tflops_fp16),
            _check_throughput("fp32 TFLOPS", tflops_fp32),
        )
        if r
    ]
    if problems:
        return _unidentified(*problems)
    measured = {
        p: float(v) for p, v in zip(_PRECISIONS, (tflops_fp16, tflops_fp32), strict=True) if v is not None
    }
    if not measured:
        return _unidentified("no throughput measured")
    reasons: list[str] = []
    memory = _usable_memory(memory_gb, reasons)
    fits = _fits(measured, table)
    matching = {k: fit for k, fit in fits.items() if fit[1] <= 1.0}
    if not matching:
        found = _no_match(measured, table)
        return Identification(found.model, found.confidence, (*reasons, *found.reasons), (), found.weight)
    return _choose(matching, memory, reported_name, table, reasons)


def _candidates(
    matching: dict[str, tuple[float, float]], memory: float | None, table: GpuTable, reasons: list[str]
) -> list[Candidate]:
    mem_unit = math.log1p(table.memory_tolerance)
    candidates = []
    for key, (dist, _) in matching.items():
        entry = table.models[key]
        if memory is not None and memory < entry.memory_gb * (1.0 - table.memory_tolerance):
            reasons.append(f"{key} excluded: {entry.memory_gb:g} GB not covered by the proven {memory:g} GB")
            continue
        mem_dist = None if memory is None else abs(math.log(memory / entry.memory_gb)) / mem_unit
        score = dist + table.memory_hint_weight * (mem_dist or 0.0)
        candidates.append(
            Candidate(key, round(dist, 4), None if mem_dist is None else round(mem_dist, 4), round(score, 4))
        )
    return sorted(candidates, key=lambda c: (c.throughput_distance, c.model))


def _choose(
    matching: dict[str, tuple[float, float]],
    memory: float | None,
    reported_name: str | None,
    table: GpuTable,
    reasons: list[str],
) -> Identification:
    candidates = _candidates(matching, memory, table, reasons)
    if not candidates:
        return _unidentified(*reasons, "no model within throughput tolerance is covered by the proven memory")
    best_fit = candidates[0].throughput_distance
    tied = [c for c in candidates if c.throughput_distance <= best_fit + table.tie_margin]
    tied.sort(key=lambda c: (c.score, c.model))
    finalists = [c for c in tied if c.score <= tied[0].score + table.tie_margin]
    finalists.sort(key=lambda c: (table.models[c.model].weight, c.score, c.model))  # ambiguity: lower weight
    chosen, ambiguity = finalists[0], 1.0
    named = table.resolve_name(reported_name)
    if len(tied) > 1:
        names = ", ".join(c.model for c in tied)
        lowest = table.models[chosen.model].weight
        pick = next(
            (c for c in finalists if c.model == named and table.models[c.model].weight <= lowest), None
        )
        if len(finalists) == 1:
            ambiguity = 0.8 if memory is not None else 0.7
            reasons.append(
                f"throughput cannot separate {names}; {'memory' if memory is not None else 'fit'} picks {chosen.model}"
            )
        elif pick is not None:
            chosen, ambiguity = pick, 0.6
            reasons.append(
                f"{names} indistinguishable; reported name {reported_name!r} picks among the lowest weight"
            )
        else:
            ambiguity = 0.5
            reasons.append(f"{names} indistinguishable; the lowest weight {chosen.model} named")
    if reported_name and named != chosen.model:
        reasons.append(f"reported name {reported_name!r} disagrees with measured throughput")
    confidence = max(0.0, min(1.0, (1.0 - 0.5 * chosen.throughput_distance**2) * ambiguity))
    reasons.insert(0, f"{chosen.model}: throughput within {chosen.throughput_distance:.2f} tolerance units")
    return Identification(
        model=chosen.model,
        confidence=round(confidence, 4),
        reasons=tuple(reasons),
        candidates=tuple(candidates),
        weight=table.models[chosen.model].weight,
    )


__all__ = [
    "DEFAULT_TABLE_PATH",
    "TABLE_ENV_VAR",
    "UNIDENTIFIED",
    "Candidate",
    "CpuFallback",
    "GpuModel",
    "GpuTable",
    "GpuTableError",
    "Identification",
    "dominates",
    "identify",
    "load_gpu_table",
    "normalise_name",
]
