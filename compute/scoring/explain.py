"""Why a miner scored what it did: the terms of one round's sample, the moving-average step, the credit.

``explain(result, ...)`` reads a stored round result (``ok``, ``sample`` and the factors the
validator recorded with it) and the context a screen has (the GPU table, the holistic config, the
score before and after the round, the presence share, the collateral factor) and returns an
``Explanation``: per-GPU value and the table model that capped it, host factor, sustained factor,
rented bonus, availability and rental-uptime factors, presence share, collateral factor, the EMA
step and the reason for any zero. ``Explanation.line()`` is its one-line text; ``terms()`` the
same as (label, value) pairs for tables and pages.

The sample's terms multiply back to the sample: the per-GPU value is *derived* (sample ÷ GPUs ÷
every other factor), so a screen can never show terms that disagree with the figure the validator
stored; the model credited is the value function's (``gpu_credit``) on the proven figures.

What it deliberately does not do: compute a score (``holistic``, ``score``, ``presence`` do; this
module only reads), I/O, or know where its inputs are stored.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from compute.scoring.holistic import HolisticConfig, HostEvidence, host_factor, value_shape
from compute.scoring.identify import GpuTable
from compute.scoring.score import ScoringConfig, ema_update
from compute.scoring.value import ProvenGpu, gpu_credit

HOST_FIELDS = ("cpu_cores", "cpu_gbs", "ram_gb", "disk_gb")


class ResultFigures(Protocol):
    """What ``explain`` reads of a round result (``compute.store.PogResult`` has all of it)."""

    @property
    def round_id(self) -> int: ...

    @property
    def uid(self) -> int: ...

    @property
    def ok(self) -> bool: ...

    @property
    def sample(self) -> float: ...

    @property
    def reasons(self) -> tuple[str, ...]: ...

    @property
    def models(self) -> tuple[str, ...]: ...

    @property
    def tflops_fp16(self) -> float | None: ...

    @property
    def tflops_fp32(self) -> float | None: ...

    @property
    def gpu_count(self) -> int: ...

    @property
    def rented(self) -> bool: ...

    @property
    def mem_gbs(self) -> float | None: ...

    @property
    def mem_proven_gb(self) -> float | None: ...

    @property
    def sustained_factor(self) -> float | None: ...

    @property
    def credited_gpus(self) -> int | None: ...

    @property
    def host(self) -> Mapping[str, float]: ...

    @property
    def history_reset(self) -> bool: ...

    @property
    def rented_fraction(self) -> float | None: ...

    @property
    def availability(self) -> float | None: ...

    @property
    def rental_uptime(self) -> float | None: ...


@dataclass(frozen=True)
class EmaStep:
    """One moving-average step: ``new = alpha x sample + (1 - alpha) x previous`` (None: first)."""

    previous: float | None
    alpha: float
    sample: float
    new: float
    reset: bool = False  # the GPU set changed: the history restarted (previous ignored)

    def text(self) -> str:
        if self.previous is None:
            start = "GPU set changed, history restarts" if self.reset else "first sample"
            return f"score {self.new:.4g} ({start})"
        return (
            f"score {self.previous:.4g} → {self.new:.4g} "
            f"(α {self.alpha:g}: {self.alpha:g}×{self.sample:.4g} + {1 - self.alpha:g}×{self.previous:.4g})"
        )


@dataclass(frozen=True)
class Explanation:
    """The terms of one miner's round sample and what became of it (None: not applicable / unknown)."""

    uid: int
    round_id: int
    kind: str  # "verified", "partly rented", "rented", "failed"
    sample: float
    gpus: int  # GPUs the sample is paid for (a partly rented machine: its free and its rented ones)
    per_gpu: float | None  # sample ÷ gpus ÷ every factor below
    credited_as: str | None  # the table entry the value function capped the credit by ("CPU": the floor)
    host_factor: float | None
    sustained_factor: float | None
    rented_bonus: float | None  # the multiplier (1 + bonus) on rented GPUs
    rented_fraction: float | None  # rented GPUs / claimed (a multiplier of a rented machine's sample)
    availability: float | None
    rental_uptime: float | None
    rented_gpus: int = 0  # of ``gpus``, those in verified leases (a partly rented machine)
    ema: EmaStep | None = None
    presence_share: float | None = None
    collateral_factor: float | None = None
    zero_reason: str | None = None

    @property
    def credit(self) -> float | None:
        """score x presence share x collateral factor (what weights are normalised from)."""
        if self.ema is None:
            return None
        share = 1.0 if self.presence_share is None else self.presence_share
        factor = 1.0 if self.collateral_factor is None else min(1.0, self.collateral_factor)
        return self.ema.new * share * factor

    @property
    def credit_zero(self) -> str | None:
        """Why a positive score still earns no weight (None: it does, or the sample is already 0)."""
        if self.ema is None or self.ema.new <= 0:
            return None
        if self.presence_share is not None and self.presence_share <= 0:
            return "credit 0: absent at every presence check in the window"
        if self.collateral_factor is not None and self.collateral_factor <= 0:
            return "credit 0: no collateral posted"
        return None

    def why_zero(self) -> str | None:
        """The reason for a zero sample, or else for a zero credit."""
        return self.zero_reason or self.credit_zero

    def terms(self) -> list[tuple[str, str]]:
        """(label, value) in the order the sample is built; unknown terms are left out."""
        out: list[tuple[str, str]] = [("verdict", self.kind)]
        if self.per_gpu is not None:
            model = f" as {self.credited_as}" if self.credited_as else ""
            out.append(("per GPU", f"{self.per_gpu:.4g}{model} × {self.gpus} GPU(s)"))
        partly = self.kind == "partly rented"
        for label, value in (
            ("host factor", self.host_factor),
            ("sustained factor", self.sustained_factor),
            ("rented fraction", None if partly else self.rented_fraction),
            ("availability", self.availability),
            ("rental uptime", self.rental_uptime),
        ):
            if value is not None:
                out.append((label, f"×{value:.4g}"))
        if self.rented_bonus is not None:
            on = f" on {self.rented_gpus} rented GPU(s)" if partly else ""
            out.append(("rented bonus", f"×{self.rented_bonus:.3g}{on}"))
        out.append(("sample", f"{self.sample:.4g}"))
        if self.ema is not None:
            out.append(("EMA step", self.ema.text()))
        if self.presence_share is not None:
            out.append(("presence share", f"×{self.presence_share:.3g}"))
        if self.collateral_factor is not None:
            out.append(("collateral factor", f"×{self.collateral_factor:.3g}"))
        if self.credit is not None and (
            self.presence_share is not None or self.collateral_factor is not None
        ):
            out.append(("credit", f"{self.credit:.4g}"))
        if self.why_zero():
            out.append(("zero because", self.why_zero() or ""))
        return out

    def line(self) -> str:
        """One line: ``uid 3 r12 verified: 0.55 as H100 ×2 GPU · host ×1.02 · ... = 1.1; score ...``."""
        head = f"uid {self.uid} r{self.round_id} {self.kind}"
        factors = [f"{label} {value}" for label, value in self.terms()[1:] if label not in _NOT_FACTORS]
        text = f"{head}: " + " · ".join(factors) if factors else head
        text += f" = sample {self.sample:.4g}"
        if self.ema is not None:
            text += f"; {self.ema.text()}"
        if self.presence_share is not None:
            text += f"; presence ×{self.presence_share:.3g}"
        if self.collateral_factor is not None:
            text += f"; collateral ×{self.collateral_factor:.3g}"
        if self.credit is not None and (
            self.presence_share is not None or self.collateral_factor is not None
        ):
            text += f" = credit {self.credit:.4g}"
        if self.why_zero():
            text += f"; zero: {self.why_zero()}"
        return text


_NOT_FACTORS = {"sample", "EMA step", "presence share", "collateral factor", "credit", "zero because"}


def _num(value: float | None) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _gpus(result: ResultFigures) -> int:
    return max(1, result.credited_gpus or result.gpu_count or 1)


def _credited_as(result: ResultFigures, table: GpuTable | None, holistic: HolisticConfig) -> str | None:
    """The model the value function credits the proven figures as (the CPU floor: "CPU")."""
    if table is None:
        return Counter(result.models).most_common(1)[0][0] if result.models else None
    proven = ProvenGpu(
        result.tflops_fp16 or 0.0,
        result.tflops_fp32 or 0.0,
        result.mem_proven_gb or 0.0,
        result.mem_gbs or 0.0,
    )
    credit = gpu_credit(proven, table, value_shape(holistic))
    if credit.value <= 0:
        return None
    return credit.credited_as or "CPU"


def _zero_reason(result: ResultFigures, per_gpu: float | None) -> str | None:
    first = result.reasons[0] if result.reasons else ""
    if not result.ok:
        return first or "failed"
    if result.sample > 0:
        return None
    if first.startswith("shared device"):
        return first
    for label, value in (("availability", result.availability), ("rental uptime", result.rental_uptime)):
        if value is not None and value <= 0:
            return f"{label} 0"
    if result.rented:
        return first or "rented: never verified, no score"
    if per_gpu is not None and per_gpu <= 0:
        return "no GPU credited: the proven figures reach no model and no CPU floor"
    return first or "sample 0"


def _ema(
    result: ResultFigures, previous: float | None, new: float | None, scoring: ScoringConfig
) -> EmaStep | None:
    alpha = scoring.ema_alpha
    reset = bool(result.history_reset)
    prev = None if reset else _num(previous)
    computed = ema_update(prev, result.sample, alpha, scoring.min_score)
    stored = _num(new)
    return EmaStep(prev, alpha, result.sample, computed if stored is None else stored, reset)


def explain(
    result: ResultFigures,
    *,
    table: GpuTable | None = None,
    holistic: HolisticConfig | None = None,
    scoring: ScoringConfig | None = None,
    previous_score: float | None = None,
    new_score: float | None = None,
    with_ema: bool = True,
    presence_share: float | None = None,
    collateral_factor: float | None = None,
) -> Explanation:
    """The terms of ``result``'s sample (module docstring). ``previous_score``/``new_score``: the
    moving average before and after the round (``new_score`` None: computed with ``scoring``'s
    alpha); ``with_ema=False`` leaves the step out (a screen that does not know it)."""
    holistic = holistic or HolisticConfig()
    scoring = scoring or ScoringConfig()
    availability, uptime = _num(result.availability), _num(result.rental_uptime)
    rental = (1.0 if availability is None else availability) * (1.0 if uptime is None else uptime)
    fraction = _num(result.rented_fraction)
    sustained = host = bonus = per_gpu = None
    gpus, rented_gpus = _gpus(result), 0
    if not result.ok:
        kind = "failed"
        availability = uptime = None  # nothing was multiplied: the sample is 0
    elif result.rented:  # the last whole verification's sample x bonus x fraction x rental factors
        kind = "rented"
        bonus = 1.0 + scoring.rented_bonus
        divisor = rental * bonus * (fraction if fraction else 1.0) * max(1, result.gpu_count or 1)
        gpus = max(1, result.gpu_count or 1)
        per_gpu = result.sample / divisor if divisor > 0 else 0.0
    else:
        kind = "partly rented" if fraction else "verified"
        raw = _num(result.sustained_factor)  # as ``holistic_score`` clips it (None: not measured, 1)
        sustained = max(holistic.sustained.floor, min(1.0, 1.0 if raw is None else max(0.0, raw)))
        figures = {k: float(v) for k, v in (result.host or {}).items() if k in HOST_FIELDS}
        host = host_factor(HostEvidence(**figures), holistic)
        bonus = (1.0 + scoring.rented_bonus) if fraction else None
        paid = float(gpus)
        if fraction and fraction < 1.0:  # rented GPUs beside the free ones, each x (1 + bonus)
            rented_gpus = round(gpus * fraction / (1.0 - fraction))
            paid += rented_gpus * (bonus or 1.0)
            gpus += rented_gpus
        divisor = rental * sustained * host * paid
        per_gpu = result.sample / divisor if divisor > 0 else 0.0
    credited_as = _credited_as(result, table, holistic) if result.ok and not result.rented else None
    if result.rented and result.models:
        credited_as = Counter(result.models).most_common(1)[0][0]
    return Explanation(
        uid=result.uid,
        round_id=result.round_id,
        kind=kind,
        sample=max(0.0, _num(result.sample) or 0.0),
        gpus=gpus,
        per_gpu=per_gpu,
        credited_as=credited_as,
        host_factor=host,
        sustained_factor=sustained,
        rented_bonus=bonus,
        rented_fraction=fraction,
        availability=availability,
        rental_uptime=uptime,
        rented_gpus=rented_gpus,
        ema=_ema(result, previous_score, new_score, scoring) if with_ema else None,
        presence_share=_num(presence_share),
        collateral_factor=_num(collateral_factor),
        zero_reason=_zero_reason(result, per_gpu),
    )


__all__ = ["EmaStep", "Explanation", "ResultFigures", "explain"]
