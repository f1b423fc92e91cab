"""In-depth Proof-of-GPU inside a validation lease: memory, sustained throughput, scaling, host probes.

Drives the worker ops of docs/pog-depth.md over a ``PogSession`` and turns what the validator
checked and timed into figures (``compute.pog`` judges every answer; this module only sequences
them, chooses sizes and interprets verdicts):

- ``prove_memory``: every round, before the GEMM rounds (at the lockstep window's moment). Sized from the GPU table (claimed model's
  memory and bandwidth), or from the small CPU settings for a machine without GPUs (the demo). A
  mathematics failure is a cheat (``DepthRejected``: the round fails); a timing failure only leaves
  the memory unproven (no memory share, no memory hint for identification).
- ``prove_sustained`` and the host proofs: on the sustained cadence (``sustained_due``). The disk
  proof is split around the sustained run: ``write_disk`` before it, ``probe_host`` (CPU cores, RAM
  resident on the host, the disk read-back) after it. A host term not proven is simply absent.
- ``prove_scaling``: when two or more GPUs are claimed, each GPU alone against the N-GPU timing
  (alone answers can only drop GPUs; the count stays bounded by the concurrent run).

It does not score, persist or identify anything.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol

from compute.pog import (
    Challenge,
    Credit,
    MemoryChallenge,
    MemoryPolicy,
    SustainedReport,
    analyse_series,
    check_cpu,
    check_disk,
    check_rows,
    choose_memory_openings,
    choose_openings,
    choose_segments,
    cpu_request,
    credited_gpus,
    disk_read_request,
    disk_write_request,
    judge_memory_timing,
    new_challenge,
    plan_memory,
    plan_sustained,
    proven_bytes,
    ram_challenge,
    scaling_efficiency,
)
from compute.pog.sustained import SustainedError, confirmation_reference, confirmed
from compute.scoring import GpuTable
from compute.validator.params import DepthParams, RoundParams
from compute.validator.proofs.checked import ProofCheck
from compute.validator.proofs.distance import measure_round_trip, passes_for
from compute.validator.proofs.offloaded import verify_memory, verify_opening
from compute.validator.proofs.physics import ChainPhysics
from compute.validator.session.pog_session import MemoryGate, PogSession, TimedMemory, WorkerFailed

log = logging.getLogger(__name__)
MAX_PASSES = 256  # MemoryChallenge.passes' bound
AFTER_PINGS = 3  # round trips measured right after a gated chain (the fastest counts)


class DepthRejected(Exception):
    """A proof of the in-depth rounds was mathematically wrong: the miner cheated or is broken."""


@dataclass(frozen=True)
class MemoryOutcome:
    """What the memory proof credits, per GPU: ``proven_bytes`` (A's bytes, resident and proven by
    both judges; 0 otherwise) and ``gbs`` (A's bytes / validator-timed pass; 0 when not proven)."""

    proven: tuple[bool, ...]  # per GPU: both judges passed
    gbs: tuple[float, ...]  # per GPU, validator clock
    proven_gb: float  # size of A per GPU when every GPU proved it (0 otherwise)
    claimed_gb: float  # the table memory the challenge was sized from (never credited as such)
    reasons: tuple[str, ...] = ()
    proven_bytes: tuple[int, ...] = ()  # per GPU
    started_at: float | None = None  # validator clock: the start nonce was written
    arrivals: tuple[tuple[float, ...], ...] = ()  # per GPU, each pass line's arrival (validator clock)
    table_pass_s: float = 0.0  # one pass at the table's bandwidth (the residency judge's widest spacing)
    physics: ChainPhysics | None = None  # the chain at the claimed figures: its pace and two-chain gap
    bound_s: float = math.inf  # the largest allowance under which no device finishes two such chains
    rtt_after_s: float = 0.0  # the session's round trip measured right after the chain (gated proofs)

    @property
    def all_proven(self) -> bool:
        return bool(self.proven) and all(self.proven)


class LockstepGate(MemoryGate, Protocol):
    """A lockstep window's gates (``compute.validator.lockstep``), told this proof's bounds first."""

    def expect(self, build_s: float, chain_s: float) -> None: ...

    async def chained(self) -> None: ...

    async def guard(self, step: Awaitable[TimedMemory]) -> TimedMemory: ...


@dataclass(frozen=True)
class ScalingOutcome:
    efficiency: float
    credit: Credit


@dataclass(frozen=True)
class HostOutcome:
    figures: dict[str, float] = field(default_factory=dict)  # cpu_cores, cpu_gbs, ram_gb, disk_gb
    reasons: tuple[str, ...] = ()


def sustained_due(round_id: int, last_depth_round: int | None, every: int) -> bool:
    """Whether this round runs the sustained test and host probes for a miner."""
    return last_depth_round is None or every <= 1 or round_id - last_depth_round >= every


def memory_shape(
    table: GpuTable, claimed_names: list[str], depth: DepthParams
) -> tuple[float, float, MemoryPolicy] | None:
    """(memory GB, bandwidth GB/s, policy) to plan with; None when a claimed model is unknown."""
    if not claimed_names:
        policy = MemoryPolicy(
            max_regen_rate=depth.cpu_regen_rate, host_stream_gbs=0.0, min_bandwidth_fraction=0.0
        )
        return depth.cpu_memory_mb / 1000.0, depth.cpu_bandwidth_gbs, policy
    found = [table.models.get(table.resolve_name(name) or "") for name in claimed_names]
    models = [model for model in found if model is not None]
    if len(models) != len(found):
        return None
    smallest = min(models, key=lambda m: m.memory_gb)
    policy = MemoryPolicy(max_regen_rate=depth.gpu_regen_rate, host_stream_gbs=depth.gpu_host_stream_gbs)
    return smallest.memory_gb, min(m.bandwidth_gbs for m in models), policy


async def prove_memory(
    check: ProofCheck,
    session: PogSession,
    claimed_names: list[str],
    gpu_count: int,
    rtt_s: float = 0.0,
    gate: LockstepGate | None = None,
    beside: bool = False,
) -> MemoryOutcome | None:
    """The memory proof under ``check``'s round parameters and GPU table; with ``gate``, its build
    and start wait for the lockstep window's gates, and the round trip is measured again right after
    the chain (the residency judge's allowance follows the larger of the two). Every chain runs
    ``chain_passes``; ``rtt_s`` (the session's round trip) is never subtracted (``proofs.distance``).
    No ``claimed_names``: a machine without GPUs (the CPU build bound). ``beside``: the small proof
    beside a rented GPU's tenant (``depth.beside_share`` of its memory, rounds for
    ``depth.beside_margin``: the tenant shares the bandwidth, so its pace is the time judge's own and
    it claims no exclusivity), judged the same way."""
    params, lockstep = check.params, check.params.lockstep
    depth, timeout = params.depth, params.miner_timeout
    build_slack_s = lockstep.build_s if claimed_names else lockstep.cpu_build_s
    plan = plan_chain(check.table, claimed_names, gpu_count, params, beside)
    if plan is None:
        log.info("memory proof skipped: claimed GPU model not in the table")
        return None
    challenge, policy, physics, regen_s = plan.challenge, plan.policy, plan.physics, plan.regen_s
    if gate is not None:
        chain_s = challenge.passes * physics.pass_s
        gate.expect(build_slack_s + 16 * regen_s, 5.0 + 4 * chain_s)
        timeout = min(timeout, build_slack_s + 16 * regen_s + 4 * chain_s)
    rtt_after = 0.0
    if gate is None:
        timed = await session.memory_commit(challenge, timeout)
    else:
        timed = await gate.guard(session.memory_commit(challenge, timeout, gate=gate))
        rtt_after = await measure_round_trip(session, timeout, pings=AFTER_PINGS)
        await gate.chained()
    request = choose_memory_openings(challenge, depth.memory_open_passes)  # after every pass arrived
    rows = check_rows(challenge)  # the secret rows of A, drawn here; checked where the line is parsed
    line = await session.memory_open_line(request, challenge.n, timeout)
    maths = await verify_memory(
        line, "memory_open", challenge, timed.commitment, request, rows, params.verify_workers
    )
    if not maths.ok:
        raise DepthRejected("memory proof rejected: " + "; ".join(maths.reasons[:3]))
    expected = plan.bandwidth_gbs if claimed_names else None
    timing = judge_memory_timing(challenge, timed.started_at, timed.arrivals, policy, expected)
    credited = tuple(proven_bytes(challenge, maths, timing))
    proven = tuple(size > 0 for size in credited)
    gbs = (
        tuple((result.gbs or 0.0) if ok else 0.0 for result, ok in zip(timing.per_gpu, proven, strict=False))
        or (0.0,) * gpu_count
    )
    size = challenge.matrix_bytes / 1e9
    return MemoryOutcome(
        proven,
        gbs,
        size if all(proven) else 0.0,
        plan.memory_gb,
        tuple(timing.reasons[:3]),
        credited,
        timed.started_at,
        tuple(tuple(times) for times in timed.arrivals),
        physics.pass_s,
        physics,
        plan.bound_s,
        rtt_after,
    )


@dataclass(frozen=True)
class ChainPlan:
    """A memory chain as the validator plans it, and what its timing can prove."""

    challenge: MemoryChallenge
    policy: MemoryPolicy
    physics: ChainPhysics
    memory_gb: float  # the table memory it was sized from (never credited as such)
    bandwidth_gbs: float  # the table bandwidth
    regen_s: float  # regenerating A once at the policy's fastest rate
    bound_s: float  # the residency judge's physical bound on the allowance (inf: beside, no exclusivity)


def plan_chain(
    table: GpuTable, claimed_names: list[str], gpu_count: int, params: RoundParams, beside: bool = False
) -> ChainPlan | None:
    """The memory chain ``prove_memory`` runs (None when a claimed model is not in the table): sized
    from the table (or the CPU settings), ``chain_passes`` long, its pace and physical bound from
    ``proofs.physics`` (a pass at ``lockstep.resident_fraction`` of the table bandwidth; beside a
    tenant, the time judge's own bound and no exclusivity)."""
    depth, lockstep = params.depth, params.lockstep
    shape = memory_shape(table, claimed_names, depth)
    if shape is None:
        return None
    memory_gb, bandwidth, policy = shape
    fraction, margin = (depth.beside_share, depth.beside_margin) if beside else (0.8, 8.0)
    challenge = plan_memory(
        memory_gb, bandwidth, gpu_count, fraction, depth.memory_passes, target_margin=margin, policy=policy
    )
    challenge = challenge.model_copy(update={"passes": chain_passes(params)})
    regen_s = challenge.n**2 * challenge.hash_rounds / policy.max_regen_rate
    physics = ChainPhysics.of(
        challenge.matrix_bytes,
        bandwidth,
        regen_s,
        policy.host_stream_gbs,
        0.0 if beside else lockstep.resident_fraction,
        policy.min_margin,
    )
    bound = math.inf if beside else physics.bound_s(challenge.passes)
    return ChainPlan(challenge, policy, physics, memory_gb, bandwidth, regen_s, bound)


def chain_passes(params: RoundParams) -> int:
    """Passes of every memory chain: ``lockstep.chain_passes`` (at most ``MAX_PASSES``), whatever the
    seat's round trip or class. A chain's physical bound grows with its length, so the longest chain
    the proof allows gives the widest allowance; and every seat of a model runs the same chain, so no
    seat's bound rests on another's length (a shorter chain beside a longer one takes less of the
    device, which would loosen the longer one's bound). A far seat's round trip is then at most
    0.6 s of a chain of 256 passes (3.7-16 s at the table's figures)."""
    return max(2, min(MAX_PASSES, params.lockstep.chain_passes))


async def prove_sustained(
    session: PogSession,
    expected_tflops: float,
    gpu_count: int,
    cpu: bool,
    depth: DepthParams,
    timeout: float,
    reference_tflops: float | None = None,
    cpu_m: int = 256,
    verify_workers: int = 0,
) -> SustainedReport:
    """Segments back to back, stamped on arrival; a few opened and verified (always the last).

    ``reference_tflops`` is the validator-timed GEMM throughput of all the GPUs this round (times the
    class's calibrated segment efficiency): the last segments are compared with it, not only with the
    miner's first. A CPU machine runs segments of the GEMM round's own width ``cpu_m`` (small enough
    to keep), so the reference compares like with like. A throttled verdict is re-confirmed at once by
    a second run judged against the first run's opening throughput too (``sustained.confirmed``)
    before it is carried forward for rounds."""
    args = (session, expected_tflops, gpu_count, cpu, depth, timeout, cpu_m, verify_workers)
    report = await _sustained_run(*args, reference_tflops)
    if not report.throttled:
        return report
    log.info("sustained run throttled (ratio %.3f): confirming with a second run", report.ratio)
    return confirmed(report, await _sustained_run(*args, confirmation_reference(report)))


async def _sustained_run(
    session, expected_tflops, gpu_count, cpu, depth, timeout, cpu_m, verify_workers, reference_tflops
) -> SustainedReport:
    if cpu:
        plan = plan_sustained(
            expected_tflops, "fp32", 1, depth.cpu_sustained_seconds, depth.cpu_sustained_seconds / 4, m=cpu_m
        )
    else:
        plan = plan_sustained(
            expected_tflops, "fp16", gpu_count, depth.sustained_seconds, depth.sustained_segment_s
        )
    segments = plan.challenges()
    series = await session.sustained(segments, timeout)
    for index in choose_segments(plan, 3):
        challenge = plan.segment(index)
        request = choose_openings(challenge, 4, 4)
        line = await session.sustained_open_line(index, request, challenge.p, timeout)
        commitment = series.commitments[index]
        verdict = await verify_opening(line, "sustained_open", challenge, commitment, request, verify_workers)
        if not verdict.ok:
            raise DepthRejected(f"sustained segment {index} rejected: " + "; ".join(verdict.reasons[:2]))
    try:
        return analyse_series(
            series.sent_at, series.arrivals, plan.flops_per_segment, reference_tflops=reference_tflops
        )
    except SustainedError as exc:
        raise DepthRejected(f"sustained series unusable: {exc}") from None


async def prove_scaling(
    session: PogSession,
    together: Challenge,
    together_s: float,
    gpu_count: int,
    timeout: float,
    verify_workers: int = 0,
) -> ScalingOutcome:
    """Each GPU alone on a one-GPU challenge of the N-GPU challenge's shape.

    The credited count stays bounded by the concurrent run (``together``, verified per GPU); an
    alone answer the worker refuses (``ok: false``) or delivers slowly only drops that GPU. A wrong
    alone proof is a cheat (``DepthRejected``); silence past ``timeout`` fails the round."""
    per_gpu_flops = 2.0 * together.m * together.n * together.p
    together_tflops = [per_gpu_flops / max(together_s, 1e-6) / 1e12] * gpu_count
    alone: list[float | None] = []
    for device in range(gpu_count):
        challenge = new_challenge(
            together.precision, together.m, together.n, together.p, 1, chunk=together.chunk
        )
        try:
            timed = await session.commit_on(challenge, device, timeout)
        except WorkerFailed as exc:
            log.info("GPU %d alone: no answer (%s): not credited", device, exc)
            alone.append(None)
            continue
        request = choose_openings(challenge, 4, 4)
        line = await session.open_rows_line(request, challenge.p, timeout)
        verdict = await verify_opening(line, "open", challenge, timed.commitment, request, verify_workers)
        if not verdict.ok:
            raise DepthRejected(f"GPU {device} alone: proof rejected: " + "; ".join(verdict.reasons[:2]))
        alone.append(per_gpu_flops / max(timed.elapsed_s, 1e-6) / 1e12)
    credit = credited_gpus(gpu_count, [True] * gpu_count, together_tflops, alone)
    efficiency = scaling_efficiency(together_tflops, [a or 0.0 for a in alone])
    return ScalingOutcome(efficiency, credit)


@dataclass(frozen=True)
class DiskWrite:
    """A disk proof between its two steps: what was asked, answered, and how long it took."""

    request: dict
    result: dict | None
    elapsed_s: float
    reason: str = ""


async def write_disk(session: PogSession, cpu: bool, depth: DepthParams, timeout: float) -> DiskWrite:
    """First step of the disk proof: the worker writes the seeded chain now; it is read back later."""
    request = disk_write_request((depth.cpu_disk_mb if cpu else depth.probe_disk_mb) << 20)
    try:
        result, elapsed = await session.probe({**request, "path": "."}, timeout, op="disk_write")
    except WorkerFailed as exc:  # a worker that cannot write simply proves no disk
        return DiskWrite(request, None, 0.0, f"disk write failed: {exc}")
    return DiskWrite(request, result, elapsed)


async def _prove_ram(
    session: PogSession,
    cpu: bool,
    depth: DepthParams,
    timeout: float,
    cores: float,
    verify_workers: int = 0,
    rtt_s: float = 0.0,
    share: float = 0.02,
) -> tuple[float, str]:
    """Host RAM: the memory proof resident in host memory, judged against regeneration by ``cores``
    cores at the fastest per-core rate (``ram_challenge``); credited GB = A's size when proven; as
    many passes as the session's round trip needs (at most ``share`` of the chain)."""
    size_gb = (depth.cpu_probe_mb if cpu else depth.probe_ram_mb) / 1000.0
    pass_s = size_gb / (max(1.0, cores) * depth.host.core_pass_gbs)  # planned, as ram_challenge plans
    passes = passes_for(8, pass_s, rtt_s, share, MAX_PASSES)
    challenge, policy = ram_challenge(size_gb, cores, depth.host, passes=passes)
    timed = await session.memory_commit(challenge, timeout, slot="ram")
    request = choose_memory_openings(challenge, 3)
    rows = check_rows(challenge)
    line = await session.memory_open_line(request, challenge.n, timeout, slot="ram")
    maths = await verify_memory(line, "ram_open", challenge, timed.commitment, request, rows, verify_workers)
    timing = judge_memory_timing(challenge, timed.started_at, timed.arrivals, policy)
    credited = proven_bytes(challenge, maths, timing)[0]
    return credited / 1e9, "; ".join((maths.reasons or timing.reasons)[:1])


async def probe_host(
    session: PogSession,
    cpu_count: int,
    cpu: bool,
    depth: DepthParams,
    timeout: float,
    disk: DiskWrite,
    verify_workers: int = 0,
    rtt_s: float = 0.0,
    share: float = 0.02,
) -> HostOutcome:
    """CPU cores, host RAM and the disk read-back, each proven on the validator's clock or left out.

    The RAM proof's regeneration bound counts the larger of the cores the miner reports and the cores
    its CPU proof showed: reporting or showing fewer only costs CPU credit (a core is worth 16 x the
    whole RAM term at the default weights), it never loosens the bound below the host's real size
    for free."""
    figures: dict[str, float] = {}
    reasons: list[str] = []
    request = cpu_request(max(1, min(cpu_count, 256)), 8 if cpu else depth.cpu_steps_per_checkpoint)
    result, elapsed = await session.probe(request, timeout, limit=(1 << 16) + request["chains"] * 128 * 70)
    check = await asyncio.to_thread(check_cpu, request, result, elapsed, depth.host)
    if check.ok:
        figures["cpu_cores"], figures["cpu_gbs"] = check.value, check.rate
    else:
        reasons.append("cpu proof: " + "; ".join(check.reasons[:1]))
    try:
        cores = max(float(cpu_count), figures.get("cpu_cores", 0.0), 1.0)
        ram_gb, reason = await _prove_ram(session, cpu, depth, timeout, cores, verify_workers, rtt_s, share)
    except WorkerFailed as exc:  # e.g. the RAM could not be allocated: nothing proven
        ram_gb, reason = 0.0, str(exc)
    if ram_gb > 0:
        figures["ram_gb"] = ram_gb
    else:
        reasons.append(f"ram proof: {reason}")
    if disk.result is None:
        reasons.append(disk.reason)
    else:
        read_request = disk_read_request(disk.request["bytes"] // 4096, seed=disk.request["seed"])
        read, read_s = await session.probe(read_request, timeout, op="disk_read", limit=1 << 20)
        check = await asyncio.to_thread(
            check_disk, disk.request, disk.result, disk.elapsed_s, read_request, read, read_s, depth.host
        )
        if check.ok:
            figures["disk_gb"] = check.value
        else:
            reasons.append("disk proof: " + "; ".join(check.reasons[:1]))
    return HostOutcome(figures, tuple(reasons))
