"""What one validator round needs to test a miner: the target and the round's parameters.

A plain value built from the settings once per round (tests build ``RoundParams`` directly), so the
per-miner steps never read settings themselves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from compute.scoring import HolisticConfig
from compute.store import PogResult
from compute.validator.depth import DepthParams
from compute.validator.settings import ValidatorSettings


@dataclass(frozen=True)
class MinerTarget:
    uid: int
    hotkey: str
    endpoint: str  # "ip:port"


@dataclass(frozen=True)
class RoundParams:
    """What a round needs from the settings (a plain value, so tests build it directly)."""

    round_id: int
    block: int
    miner_timeout: float = 300.0
    retries: int = 1
    pog_m: int = 8192
    pog_n: int = 0
    pog_p: int = 8192
    target_seconds: float = 3.0
    rows_per_gpu: int = 8
    cols_per_row: int = 4
    lease_seconds: int = 600
    lease_memory_gb: float = 2.0
    device: str = "auto"
    rented_max_age: int = 24
    rented_decay: float = 0.95
    depth: DepthParams = DepthParams()
    holistic: HolisticConfig = HolisticConfig()
    force_depth: bool = False  # run sustained and host probes this round whatever the cadence
    trusted_renters: frozenset[str] = frozenset()  # renters whose signed leases count as rented
    rental_probe_timeout: float = 15.0


def round_params(s: ValidatorSettings, holistic: HolisticConfig | None = None) -> RoundParams:
    """The round's parameters from the validator settings (round id and block filled in per round)."""
    depth = DepthParams(
        memory_passes=s.memory_passes,
        sustained_every=s.sustained_every,
        sustained_seconds=s.sustained_seconds,
        probe_ram_mb=s.probe_ram_mb,
        probe_disk_mb=s.probe_disk_mb,
        cpu_memory_mb=s.cpu_memory_mb,
        cpu_bandwidth_gbs=s.cpu_bandwidth_gbs,
        cpu_sustained_seconds=s.cpu_sustained_seconds,
    )
    return RoundParams(
        round_id=0,
        block=0,
        miner_timeout=s.miner_timeout,
        retries=s.retries,
        pog_m=s.pog_m,
        pog_n=s.pog_n,
        pog_p=s.pog_p,
        target_seconds=s.target_seconds,
        rows_per_gpu=s.rows_per_gpu,
        cols_per_row=s.cols_per_row,
        lease_seconds=s.lease_seconds,
        device=s.device,
        rented_max_age=s.rented_max_age,
        rented_decay=s.rented_decay,
        trusted_renters=frozenset(s.trusted_renters),
        depth=depth,
        holistic=holistic or HolisticConfig(),
    )


def failed_result(
    target: MinerTarget, params: RoundParams, reasons: tuple[str, ...], timings: dict | None = None
) -> PogResult:
    """A failed test of ``target`` this round: ``ok`` False, sample 0, with its reasons."""
    return PogResult(
        round_id=params.round_id,
        uid=target.uid,
        hotkey=target.hotkey,
        ok=False,
        sample=0.0,
        reasons=reasons,
        timings=timings or {},
        block=params.block,
        created=time.time(),
    )
