"""Memory proof v2, validator side: wire models, sizing (``plan_memory``) and opening choice.

``plan_memory`` sizes each GPU's A to ``fraction`` of the model's memory and picks ``hash_rounds`` so
that regenerating A at the fastest plausible rate (``MemoryPolicy.max_regen_rate``) takes
``target_margin`` x longer than reading it at the table's bandwidth. Pydantic at the trust boundary;
numpy only. It neither runs nor judges anything (``memory.verify`` does).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..draws import MEMORY_PASSES, oracle_rng
from .kernel import MAX_HASH_ROUNDS, MAX_MEM_N, MAX_PASSES, ROUND_GROUP

Hex32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MemoryChallenge(_Model):  # validator -> worker
    kind: Literal["pog.memory_challenge"] = "pog.memory_challenge"
    challenge_id: Hex32
    key: Hex32
    n: int = Field(ge=16, le=MAX_MEM_N)
    passes: int = Field(ge=2, le=MAX_PASSES)
    hash_rounds: int = Field(ge=1, le=MAX_HASH_ROUNDS)
    gpu_count: int = Field(ge=1, le=16)
    start: Hex32  # secret until A is built: sent with memory_commit, never with memory_build

    @property
    def matrix_bytes(self) -> int:
        return 4 * self.n * self.n

    def build_message(self) -> dict:
        """The ``memory_build`` challenge: everything but the start nonce."""
        return self.model_dump(mode="json", exclude={"start"})

    def start_message(self) -> dict:
        """The ``memory_commit`` request: the start nonce, sent once A is built."""
        return {"challenge_id": self.challenge_id, "start": self.start}


class MemoryCommitment(_Model):  # worker -> validator
    challenge_id: Hex32
    leaves: list[list[Hex64]] = Field(min_length=1, max_length=16)  # per GPU, one per pass
    chain_s: float | None = None  # advisory


class MemoryOpenRequest(_Model):  # validator -> worker
    challenge_id: Hex32
    passes: list[list[Annotated[int, Field(ge=1, le=MAX_PASSES)]]] = Field(min_length=1, max_length=16)


class VectorB64(_Model):
    dtype: Literal["<u4"]
    shape: list[Annotated[int, Field(ge=1, le=MAX_MEM_N)]] = Field(min_length=1, max_length=1)
    data: str = Field(max_length=4 * ((4 * MAX_MEM_N + 2) // 3))


class GpuMemoryOpening(_Model):
    indices: list[Annotated[int, Field(ge=1, le=MAX_PASSES)]] = Field(min_length=1, max_length=32)
    vectors: list[VectorB64] = Field(min_length=1, max_length=32)


class MemoryOpening(_Model):  # worker -> validator
    challenge_id: Hex32
    per_gpu: list[GpuMemoryOpening] = Field(min_length=1, max_length=16)


@dataclass(frozen=True)
class MemoryPolicy:
    """Timing thresholds. ``max_regen_rate``: element-rounds/s the fastest device could mix (H100:
    ~15 Tops int32 / ~9 ops per round ~ 1.7e12; default 1e13 leaves ~6x); ``host_stream_gbs``: what a
    device could stream from host memory (PCIe 5 x16 ~ 64 GB/s); 0 disables (CPU devices)."""

    max_regen_rate: float = 1e13
    min_margin: float = 3.0
    host_stream_gbs: float = 64.0
    min_bandwidth_fraction: float = 0.0  # proven GB/s is credited as measured; 0 disables the floor
    max_bandwidth_factor: float = 3.0  # pass lines spaced faster than this x the table's GB/s: buffered
    max_device_gbs: float = 20000.0  # the same ceiling when the bandwidth is unknown; 0 disables
    max_bunching: float = 10.0  # lines spaced this x closer than (last - start) / passes, and
    max_lead_s: float = 0.5  # the first one this much later than a pass after the start: buffered


def plan_memory(
    memory_gb: float,
    bandwidth_gbs: float,
    gpu_count: int = 1,
    fraction: float = 0.8,
    passes: int = 16,
    target_margin: float = 8.0,
    policy: MemoryPolicy | None = None,
    rng: np.random.Generator | None = None,
) -> MemoryChallenge:
    """Size A to ``fraction`` of ``memory_gb`` (more than half: one device cannot hold two) and pick
    rounds so that regenerating A per pass at ``max_regen_rate`` takes ``target_margin`` x longer
    than reading it at ``bandwidth_gbs`` (margin = rounds x bandwidth / (4 x rate), independent of n)."""
    policy = policy or MemoryPolicy()
    n = int(math.isqrt(int(fraction * memory_gb * 1e9 / 4)))
    n = max(16, min(MAX_MEM_N, n - n % 16))
    rounds = math.ceil(target_margin * 4 * policy.max_regen_rate / (bandwidth_gbs * 1e9) / ROUND_GROUP)
    rounds *= ROUND_GROUP  # whole groups: the CUDA prover fuses ROUND_GROUP rounds per kernel
    token = (lambda: secrets.token_hex(16)) if rng is None else (lambda: rng.bytes(16).hex())
    return MemoryChallenge(
        challenge_id=token(),
        key=token(),
        n=n,
        passes=passes,
        hash_rounds=max(1, min(MAX_HASH_ROUNDS, rounds)),
        gpu_count=gpu_count,
        start=token(),
    )


def choose_memory_openings(
    challenge: MemoryChallenge, passes_per_gpu: int = 4, rng: np.random.Generator | None = None
) -> MemoryOpenRequest:
    """Passes to open per GPU, drawn after every pass line arrived: always pass 1 (checked against
    the keyed start vector) plus ``passes_per_gpu`` distinct random passes from 2..passes."""
    rng = (
        rng
        or oracle_rng(MEMORY_PASSES, challenge.challenge_id)
        or np.random.default_rng(secrets.randbits(64))
    )
    count = min(passes_per_gpu, challenge.passes - 1)
    picks = [
        [1] + sorted(int(r) + 2 for r in rng.choice(challenge.passes - 1, count, replace=False))
        for _ in range(challenge.gpu_count)
    ]
    return MemoryOpenRequest(challenge_id=challenge.challenge_id, passes=picks)
