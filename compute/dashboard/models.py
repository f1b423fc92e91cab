"""JSON shapes the dashboard serves (read-only), parsed again by clients such as ``register.py``.

``ProvenMachine`` is one miner's latest passing, non-rented PoG result as the validator stored it:
the figures it measured on its own clock, never the miner's claims.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from compute.peertext import PeerText
from compute.store import PogResult


class ProvenMachine(BaseModel):
    """What the validator proved about one miner's machine (dashboard -> operator)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    hotkey: Annotated[str, PeerText(128)] = Field(min_length=1)
    uid: int = Field(ge=0)
    gpu_model: Annotated[str, PeerText(128)]
    gpu_count: int = Field(ge=0, le=1024)
    tflops_fp16: float | None = Field(None, ge=0)
    tflops_fp32: float | None = Field(None, ge=0)
    memory_gb: float | None = Field(None, ge=0)
    bandwidth_gbs: float | None = Field(None, ge=0)
    verified_at: float = Field(ge=0)
    round_id: int = Field(ge=0)
    # a multi-host miner: host name -> the sample it was credited (0: unproven, or a duplicate device)
    hosts: dict[Annotated[str, PeerText(64)], float] = Field(default_factory=dict, max_length=64)


class ProvenMachines(BaseModel):
    """Every proven machine, keyed by nothing: a list the client indexes by hotkey."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: str = "proven_machines.v1"
    machines: list[ProvenMachine] = Field(default_factory=list, max_length=65_536)


def proven_machine(result: PogResult) -> ProvenMachine:
    model = Counter(result.models).most_common(1)[0][0] if result.models else ""
    return ProvenMachine(
        hotkey=result.hotkey,
        uid=result.uid,
        gpu_model=model,
        gpu_count=result.gpu_count,
        tflops_fp16=result.tflops_fp16,
        tflops_fp32=result.tflops_fp32,
        memory_gb=result.mem_proven_gb,
        bandwidth_gbs=result.mem_gbs,
        verified_at=result.created,
        round_id=result.round_id,
        hosts=dict(result.hosts),
    )
