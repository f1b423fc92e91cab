"""Helpers for the dashboard tests: a fixed clock and PoG results of an honest H100 machine."""

from __future__ import annotations

from compute.store import PogResult

NOW = 1_700_000_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def h100(round_id: int, uid: int, hotkey: str, **extra) -> PogResult:
    fields = dict(
        ok=True,
        sample=1.0,
        models=("NVIDIA H100 80GB HBM3",) * 2,
        tflops_fp16=700.0 + uid,
        tflops_fp32=60.0,
        gpu_count=2,
        mem_gbs=3100.0,
        mem_proven_gb=78.0,
    )
    fields.update(extra)
    return PogResult(round_id, uid, hotkey, **fields)  # type: ignore[arg-type]
