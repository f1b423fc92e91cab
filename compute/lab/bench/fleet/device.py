"""The simulated GPU's figures (``Device``) and the timed lines a simulated worker answers with
(``Answer``): shared by the GEMM prover (``prover``) and the in-depth ops (``prover_depth``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from compute.pog import Challenge


@dataclass(frozen=True)
class Device:
    """The simulated GPU: table figures that set how long each answer is held."""

    name: str = "NVIDIA H100 80GB HBM3"
    memory_bytes: int = 80 * 10**9
    tflops: dict[str, float] = field(default_factory=lambda: {"fp16": 513.0, "fp32": 46.3, "bf16": 513.0})
    bandwidth_gbs: float = 3350.0
    host_bandwidth_gbs: float = 200.0  # host RAM read by the RAM proof's passes (a 64-core server)
    core_gbs: float = 1.5  # SHA-256 per host core (the CPU probe)
    disk_gbs: float = 2.0

    def gemm_seconds(self, challenge: Challenge) -> float:
        """One GPU's share of the product (all GPUs run side by side)."""
        return 2.0 * challenge.m * challenge.n * challenge.p / (self.tflops[challenge.precision] * 1e12)


@dataclass
class Answer:
    """Lines to write, each at its offset (seconds) from the moment the request arrived; an iterator
    is consumed line by line (in the prover's threads), so later lines are computed just in time."""

    lines: Iterable[tuple[float, dict]]
