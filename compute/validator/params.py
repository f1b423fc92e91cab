"""What one validator round needs to test a miner: the target and the round's parameters.

A plain value built from the settings once per round (tests build ``RoundParams`` directly), so the
per-miner steps never read settings themselves.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from compute.pog import HostPolicy
from compute.scoring import HolisticConfig
from compute.store import PogResult
from compute.validator.settings import ValidatorSettings


@dataclass(frozen=True)
class DepthParams:
    """Sizes and cadence of the in-depth rounds (defaults: production GPUs; ``cpu_*``: the demo)."""

    memory_passes: int = 16
    memory_open_passes: int = 3
    sustained_every: int = 10  # rounds between sustained runs (and host probes) per miner
    sustained_seconds: float = 60.0
    sustained_segment_s: float = 2.0
    probe_ram_mb: int = 512
    probe_disk_mb: int = 512
    cpu_memory_mb: float = 2.0  # a machine without GPUs: A of 0.6 x this, resident in RAM
    cpu_bandwidth_gbs: float = 0.1  # low on purpose: contended demo CPUs must still beat regeneration 8x
    cpu_regen_rate: float = 1e9  # element-rounds/s any CPU could hash (2-core numpy: ~1.3e8)
    cpu_sustained_seconds: float = 1.0
    cpu_probe_mb: int = 16  # the demo: host RAM proven (passes of ~10 ms: well above the per-line overhead)
    cpu_disk_mb: int = 128  # the demo: disk written (the read-back bound grows with it)
    cpu_steps_per_checkpoint: int = 32  # CPU proof: 128 x this SHA-256 steps of 16 KiB per chain
    host: HostPolicy = field(default_factory=HostPolicy)
    # a claimed GPU's memory proof: the fastest regeneration any table GPU could manage (element-rounds
    # per s) and the host link a device could stream A over instead (GB/s; 0: no such floor)
    gpu_regen_rate: float = 1e13
    gpu_host_stream_gbs: float = 64.0
    # the presence proof beside a rented GPU's tenant: this share of the proven model's memory, its
    # rounds sized for this margin at the table's bandwidth (the tenant shares the GPU's bandwidth)
    beside_share: float = 0.01  # with the worker's CUDA context (~0.5 GB), under 2 % of an 80 GB GPU
    beside_margin: float = 32.0


@dataclass(frozen=True)
class LockstepParams:
    """Bounds of a lockstep window (docs/presence.md): every prepare step is bounded by seconds above
    the round trip measured for the miner in the same session, never by ``miner_timeout`` (the
    bounds keep a window short; soundness comes from its gates and the residency judge). Every pass
    of the memory chain that proves exclusivity must arrive by the window's moment + j passes at
    ``resident_fraction`` of the claimed model's table bandwidth + an allowance: the round trip
    measured around the chain (capped) plus the seat's slack, never more than the chain's physical
    bound (``proofs.physics``: no device at the model's figures finishes two chains inside it). Every
    chain runs ``chain_passes``."""

    step_s: float = 10.0  # specs, stale leases, info: each this many s above twice the round trip
    allocate_s: float = 30.0  # the allocate call (a container start), with its idempotent retries
    bootstrap_s: float = 30.0  # SSH and worker upload; the worker's engine start (torch, CUDA)
    build_s: float = 10.0  # the memory build beyond its expected time at the table's rates
    cpu_build_s: float = 30.0  # the same for a machine without GPUs: its build shares the cores
    # with whatever else the machine runs (on the demo every miner shares one machine)
    prepare_s: float = 120.0  # the window waits this long at most for every seat to be prepared
    rtt_cap_s: float = 0.6  # a round trip above this is judged as this (distance buys no slack)
    # a GPU seat's pass lines may come this much after the pace plus the round trip: the path's delay
    # varying after the round trip was measured (1 s) and the validator's stamping (0.3 s)
    lead_slack_s: float = 1.3
    # the same for a machine without GPUs: its worker shares the cores with whatever else runs (on
    # the demo, every miner and the validator on one machine: starts 0.5-1.6 s late at load >= 10)
    cpu_lead_slack_s: float = 1.8
    # the pace every prefix of a chain must keep: a pass at this fraction of the table bandwidth (an
    # honest H100 prover reads at 0.70-0.71 of it; two chains on one device at most ~0.57)
    resident_fraction: float = 0.7
    # passes of every memory chain (the proof's most): its physical bound grows with its length, and
    # every seat runs the same length, so no seat's bound rests on another's
    chain_passes: int = 256
    judge: bool = True  # the residency judge; False only in tests, as the control of a cheat

    def slack(self, cpu: bool) -> float:
        """The lead slack of a seat: ``cpu_lead_slack_s`` for a machine without GPUs."""
        return self.cpu_lead_slack_s if cpu else self.lead_slack_s

    def after(self, step_s: float, rtt_s: float) -> float:
        """The bound of a step: ``step_s`` above twice the measured round trip (capped)."""
        return step_s + 2.0 * min(max(rtt_s, 0.0), self.rtt_cap_s)


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
    miner_timeout: float = 300.0  # one miner's own test time (waiting at a window's gates not counted)
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
    renter_coldkeys: Mapping[str, str] = field(default_factory=dict)  # hotkey -> coldkey (metagraph)
    own_canaries: frozenset[str] = frozenset()  # SSH public keys of this validator's canaries in term
    rental_probe_timeout: float = 15.0
    verify_workers: int = 0  # processes of the verification pool (compute.pog.verify_pool); 0: a thread
    lockstep: LockstepParams = LockstepParams()
    lease_proxy: tuple[str, ...] = ()  # SSH ProxyCommand argv to reach leases ({host} {port}); () = direct
    distance_share: float = 0.02  # timed work is sized so the measured round trip is at most this share
    min_timed_s: float = 0.0  # each timed GEMM run lasts at least this, near or far (the setting: 1 s)


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
        lease_proxy=tuple(shlex.split(s.lease_proxy)),
        distance_share=s.distance_share,
        min_timed_s=s.min_timed_s,
        depth=depth,
        holistic=holistic or HolisticConfig(),
        verify_workers=s.verify_workers if s.verify_workers >= 0 else os.cpu_count() or 1,
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
