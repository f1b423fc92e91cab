"""Test one miner: validation lease -> SSH -> PoG (fp16, fp32) -> verify -> identify -> score.

``check_miner`` never raises: every failure (unreachable miner, refused lease, SSH trouble, worker
garbage or silence, failed verification, per-miner timeout) becomes a ``PogResult`` with
``ok=False``, ``sample=0`` and the reasons. The lease is always released (``finally``), also on
error and cancellation. Retries (with backoff, bounded by the caller's deadline) cover only a miner
that could not be reached before a lease existed; a failed proof is final.

Rented machines (the miner refuses a GPU validation lease for lack of capacity) must show
receipts (``compute.validator.rental``): only GPUs held by leases whose renter signed the request,
is a known party and whose SSH endpoint answers with the lease's host key count as rented. A miner
that refuses with no verified lease gets nothing for the round. A verified rented machine gets a
CPU-only liveness lease: that proves the miner serves leases, NOT its GPUs, so its sample is the
machine score of its last verified identification (with the rented bonus) times the verified
rented fraction, while that is at most ``rented_max_age`` rounds old, then decays by
``rented_decay`` per round; a machine never verified scores 0. With ``canary`` set, the test first
rents the miner as a renter would (``compute.validator.canary``). What the test saw beyond PoG
goes into the caller's ``MinerNotes``. Nothing here touches the store or the chain.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass

import asyncssh

from compute.pog import Challenge, Precision, choose_openings, new_challenge, uuid_change, verify
from compute.protocol import (
    AllocateRequest,
    DeallocateRequest,
    ErrorCode,
    LeaseInfo,
    ListLeasesRequest,
    MachineSpecs,
    Requirements,
    SpecsRequest,
)
from compute.scoring import GpuTable, HolisticConfig, ScoringConfig
from compute.store import PogResult
from compute.transport import MinerClient, PeerUnreachable, Rejected, RequestTimeout, TransportError
from compute.validator.canary import run_canary
from compute.validator.depth import (
    DepthParams,
    DepthRejected,
    probe_host,
    prove_memory,
    prove_scaling,
    prove_sustained,
    sustained_due,
    write_disk,
)
from compute.validator.evidence import Measured, scored_result
from compute.validator.pog_session import PogSession, PogSessionError
from compute.validator.rental import check_rentals
from compute.validator.settings import ValidatorSettings
from compute.validator.truth import MinerNotes

log = logging.getLogger(__name__)

MAX_GPUS_TESTED = 16
PRECISIONS: tuple[Precision, ...] = ("fp16", "fp32")
CHUNK = 4096
MAX_N = 1 << 26
_RETRY_BACKOFF_S = 2.0


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


class _Failed(Exception):
    """One failed test with its reason (internal)."""


class _Unreachable(_Failed):
    """The miner could not be reached before a lease existed (worth a retry)."""


class _Rented(Exception):
    """The miner has no free GPU for a validation lease."""


async def check_miner(
    client: MinerClient,
    target: MinerTarget,
    params: RoundParams,
    table: GpuTable,
    scoring: ScoringConfig,
    previous: PogResult | None = None,
    deadline: float | None = None,
    notes: MinerNotes | None = None,
    canary: bool = False,
) -> PogResult:
    """Test ``target`` within ``params.miner_timeout`` (and before ``deadline``, monotonic)."""
    notes = notes if notes is not None else MinerNotes()
    attempt = 0
    while True:
        budget = params.miner_timeout
        if deadline is not None:
            budget = min(budget, deadline - time.monotonic())
        if budget <= 1:
            return _failure(target, params, ("round deadline reached before the test",), {})
        started = time.monotonic()
        try:
            return await asyncio.wait_for(
                _attempt(client, target, params, table, scoring, previous, notes, canary), budget
            )
        except asyncio.TimeoutError:
            return _failure(target, params, (f"miner test exceeded {budget:.0f}s",), {})
        except _Unreachable as exc:
            attempt += 1
            canary = False  # one canary per test, even when the test is retried
            if attempt > params.retries:
                return _failure(target, params, (str(exc),), {})
            wait = _RETRY_BACKOFF_S * 2 ** (attempt - 1)
            log.info("uid=%d unreachable (%s), retry %d in %.0fs", target.uid, exc, attempt, wait)
            await asyncio.sleep(wait)
        except _Failed as exc:
            return _failure(target, params, (str(exc),), {"total_s": time.monotonic() - started})
        except Exception as exc:  # the per-miner boundary: one miner never breaks the round
            log.exception("uid=%d test crashed", target.uid)
            return _failure(target, params, (f"validator error: {type(exc).__name__}: {exc}",), {})


async def _attempt(
    client: MinerClient,
    target: MinerTarget,
    params: RoundParams,
    table: GpuTable,
    scoring: ScoringConfig,
    previous: PogResult | None,
    notes: MinerNotes,
    canary: bool,
) -> PogResult:
    started = time.monotonic()
    specs = await _specs(client, target)
    await _release_stale(client, target)
    claimed = specs.gpus[:MAX_GPUS_TESTED]
    notes.claimed_gpus = len(claimed)
    notes.gpu_uuids.update(gpu.uuid for gpu in claimed if gpu.uuid)  # self-reported: may only lower
    if canary:
        timeout = min(60.0, params.miner_timeout)
        notes.canary = await run_canary(client, target.endpoint, target.hotkey, len(claimed), timeout)
    key = asyncssh.generate_private_key("ssh-ed25519")
    try:
        lease = await _allocate(client, target, params, key, len(claimed))
    except _Rented:
        return await _rented(client, target, params, table, scoring, previous, notes, key, started)
    if lease.ssh is not None:
        notes.saw_lease(lease.ssh.host, lease.ssh.port, lease.ssh.host_key)
    async with _released(client, target, lease):
        measured = await _prove(lease, key, params, table, claimed, specs, previous)
    notes.gpu_uuids.update(measured.uuids)
    measured.timings["total_s"] = time.monotonic() - started
    return scored_result(target, params, measured, table, previous)


async def _rented(
    client: MinerClient,
    target: MinerTarget,
    params: RoundParams,
    table: GpuTable,
    scoring: ScoringConfig,
    previous: PogResult | None,
    notes: MinerNotes,
    key: asyncssh.SSHKey,
    started: float,
) -> PogResult:
    """The miner refused a GPU lease: credit only the GPUs its verified rentals hold."""
    check = await check_rentals(
        client,
        target.endpoint,
        target.hotkey,
        params.trusted_renters,
        time.time(),
        params.rental_probe_timeout,
    )
    notes.rentals = check
    for held in check.alive:
        notes.saw_lease(held.host, held.port, held.host_key)
    fraction = check.fraction(notes.claimed_gpus)
    if fraction <= 0:
        why = f" ({check.rejected[0]})" if check.rejected else ""
        raise _Failed(f"refused validation with no_capacity while holding no verified lease{why}")
    lease = await _allocate(client, target, params, key, 0)
    async with _released(client, target, lease):
        await _liveness(lease, key, params)
    return _rented_result(target, params, previous, scoring, table, time.monotonic() - started, fraction)


async def _specs(client: MinerClient, target: MinerTarget) -> MachineSpecs:
    try:
        return (await client.call(target.endpoint, target.hotkey, SpecsRequest())).specs
    except (RequestTimeout, PeerUnreachable) as exc:
        raise _Unreachable(f"specs: {exc}") from None
    except TransportError as exc:
        raise _Failed(f"specs: {exc}") from None


async def _allocate(
    client: MinerClient, target: MinerTarget, params: RoundParams, key: asyncssh.SSHKey, gpu_count: int
) -> LeaseInfo:
    request = AllocateRequest(
        requirements=Requirements(
            gpu_count=gpu_count, cpu_count=1, memory_gb=params.lease_memory_gb, disk_gb=1.0
        ),
        duration_s=params.lease_seconds,
        ssh_public_key=" ".join(key.export_public_key("openssh").decode().split()[:2]),
        purpose="validation",
    )
    try:
        lease = (await client.call(target.endpoint, target.hotkey, request)).lease
    except Rejected as exc:
        if exc.code == ErrorCode.NO_CAPACITY and gpu_count > 0:
            raise _Rented() from None
        raise _Failed(f"allocate refused: {exc}") from None
    except (RequestTimeout, PeerUnreachable) as exc:
        raise _Unreachable(f"allocate: {exc}") from None
    except TransportError as exc:
        raise _Failed(f"allocate: {exc}") from None
    if lease.ssh is None:
        await _deallocate(client, target, lease.lease_id)
        raise _Failed("lease has no SSH access")
    if len(lease.gpus) < gpu_count:
        await _deallocate(client, target, lease.lease_id)
        raise _Failed(f"lease has {len(lease.gpus)} GPUs, asked for {gpu_count}")
    return lease


class _released:
    """Async context manager: deallocate the lease on the way out, whatever happened."""

    def __init__(self, client: MinerClient, target: MinerTarget, lease: LeaseInfo) -> None:
        self.args = (client, target, lease.lease_id)

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.shield(_deallocate(*self.args))


async def _deallocate(client: MinerClient, target: MinerTarget, lease_id: str) -> None:
    try:
        await asyncio.wait_for(
            client.call(target.endpoint, target.hotkey, DeallocateRequest(lease_id=lease_id)), 15
        )
    except (asyncio.TimeoutError, TransportError) as exc:
        log.warning("uid=%d lease=%s release failed (it expires on its own): %s", target.uid, lease_id, exc)


async def _release_stale(client: MinerClient, target: MinerTarget) -> None:
    """Release this validator's validation leases a killed run left on the miner (best effort)."""
    try:
        listed = await asyncio.wait_for(client.call(target.endpoint, target.hotkey, ListLeasesRequest()), 15)
    except (asyncio.TimeoutError, TransportError) as exc:
        log.debug("uid=%d listing own leases failed: %s", target.uid, exc)
        return
    for lease in listed.leases:
        if lease.purpose == "validation" and lease.state == "active":
            log.info("uid=%d releasing stale validation lease=%s", target.uid, lease.lease_id)
            await _deallocate(client, target, lease.lease_id)


async def _session(lease: LeaseInfo, key: asyncssh.SSHKey, params: RoundParams) -> PogSession:
    ssh = lease.ssh
    if ssh is None:  # _allocate already refused such a lease
        raise _Failed("lease has no SSH access")
    try:
        return await PogSession.open(
            ssh.host,
            ssh.port,
            ssh.username,
            key,
            ssh.host_key,
            timeout=min(60.0, params.miner_timeout),
            device=params.device,
        )
    except PogSessionError as exc:
        raise _Failed(str(exc)) from None


async def _liveness(lease: LeaseInfo, key: asyncssh.SSHKey, params: RoundParams) -> None:
    session = await _session(lease, key, params)
    async with session:
        try:
            await session.info(params.miner_timeout)
        except PogSessionError as exc:
            raise _Failed(f"rented liveness check: {exc}") from None


def challenge_size(
    params: RoundParams, precision: str, expected_tflops: float | None
) -> tuple[int, int, int]:
    """(m, n, p): fixed when ``pog_n`` is set, else n sized so compute takes ~target_seconds."""
    m, p = params.pog_m, params.pog_p
    if params.pog_n > 0:
        return m, params.pog_n, p
    flops = (expected_tflops or 1.0) * 1e12 * params.target_seconds
    n = max(CHUNK, math.ceil(flops / (2 * m * p) / CHUNK) * CHUNK)
    return m, min(n, MAX_N), p


def _expected_tflops(table: GpuTable, specs: MachineSpecs, precision: str) -> float | None:
    names = [table.resolve_name(gpu.name) for gpu in specs.gpus]
    figures = [table.models[name].tflops(precision) for name in names if name in table.models]
    if figures:
        return min(figures)
    if not specs.gpus:
        return None
    ordered = sorted(model.tflops(precision) for model in table.models.values())
    return ordered[len(ordered) // 2]


async def _prove(
    lease: LeaseInfo,
    key: asyncssh.SSHKey,
    params: RoundParams,
    table: GpuTable,
    claimed: list,
    specs: MachineSpecs,
    previous: PogResult | None,
) -> Measured:
    session = await _session(lease, key, params)
    async with session:
        try:
            devices = await session.info(params.miner_timeout)
            gpu_count = max(1, len(claimed))
            if claimed and len(devices) < gpu_count:
                raise _Failed(f"worker sees {len(devices)} devices, miner claims {gpu_count} GPUs")
            measured = Measured({}, {}, devices, gpu_count if claimed else 0)
            together: tuple[Challenge, float] | None = None
            for precision in PRECISIONS:
                m, n, p = challenge_size(params, precision, _expected_tflops(table, specs, precision))
                challenge = new_challenge(precision, m, n, p, gpu_count, chunk=min(CHUNK, n))
                elapsed = await _one_precision(session, challenge, params)
                measured.tflops[precision] = 2.0 * m * n * p / elapsed / 1e12
                measured.timings[f"{precision}_s"] = elapsed
                together = together or (challenge, elapsed)
            assert together is not None  # PRECISIONS is not empty
            await _prove_depth(session, params, table, claimed, specs, previous, measured, together)
        except PogSessionError as exc:
            raise _Failed(str(exc)) from None
        except DepthRejected as exc:
            raise _Failed(str(exc)) from None
    return measured


async def _prove_depth(
    session: PogSession,
    params: RoundParams,
    table: GpuTable,
    claimed: list,
    specs: MachineSpecs,
    previous: PogResult | None,
    measured: Measured,
    together: tuple[Challenge, float],
) -> None:
    """Memory every round; scaling with 2+ GPUs; sustained and host probes on their cadence."""
    depth, timeout, cpu = params.depth, params.miner_timeout, not claimed
    names = [gpu.name for gpu in claimed]
    count = max(1, measured.gpu_count)
    measured.uuids = tuple(d.uuid for d in measured.devices[:count] if d.uuid) if claimed else ()
    stored = previous.gpu_uuids if previous is not None and previous.gpu_uuids else None
    measured.history_reset = uuid_change(stored, measured.uuids).changed
    started = time.monotonic()
    measured.memory = await prove_memory(session, table, names, count, depth, timeout)
    measured.timings["memory_s"] = time.monotonic() - started
    if measured.gpu_count >= 2:
        started = time.monotonic()
        measured.scaling = await prove_scaling(session, together[0], together[1], measured.gpu_count, timeout)
        measured.timings["scaling_s"] = time.monotonic() - started
    last = None if previous is None or measured.history_reset else previous.depth_round
    if not (params.force_depth or sustained_due(params.round_id, last, depth.sustained_every)):
        return
    disk = await write_disk(session, cpu, depth, timeout)  # read back after the sustained run
    started = time.monotonic()
    expected = (
        measured.tflops["fp32"] if cpu else _expected_tflops(table, specs, "fp16") or measured.tflops["fp16"]
    )
    gemm = measured.tflops["fp32" if cpu else "fp16"]  # this round's GEMM, the validator's clock
    reference = gemm * count * params.holistic.sustained.reference_fraction
    width = min(together[0].m, together[0].p, 1024)  # CPU segments as wide as the GEMM round
    measured.sustained = await prove_sustained(
        session, expected, count, cpu, depth, timeout, reference, cpu_m=width
    )
    measured.timings["sustained_s"] = time.monotonic() - started
    started = time.monotonic()
    measured.host = await probe_host(session, specs.cpu_cores, cpu, depth, timeout, disk)
    measured.timings["probes_s"] = time.monotonic() - started
    measured.depth_ran = True


async def _one_precision(session: PogSession, challenge: Challenge, params: RoundParams) -> float:
    timed = await session.commit(challenge, params.miner_timeout)
    request = choose_openings(challenge, params.rows_per_gpu, params.cols_per_row)  # after the commitment
    opening = await session.open_rows(request, challenge.p, params.miner_timeout)
    verdict = await asyncio.to_thread(verify, challenge, timed.commitment, request, opening)
    if not verdict.ok:
        raise _Failed(f"{challenge.precision} proof rejected: " + "; ".join(verdict.reasons[:3]))
    return max(timed.elapsed_s, 1e-6)


def rented_sample(
    previous: PogResult | None, round_id: int, params: RoundParams, table: GpuTable, scoring: ScoringConfig
) -> float:
    """Score of a rented, live machine: its last verified (non-rented) sample x (1 + rented bonus),
    decaying by ``rented_decay`` per round once older than ``rented_max_age``; 0 if never verified."""
    if previous is None or not previous.ok or previous.rented:
        return 0.0
    age = round_id - previous.round_id
    score = max(0.0, previous.sample) * (1.0 + scoring.rented_bonus)
    return score * params.rented_decay ** max(0, age - params.rented_max_age)


def _rented_result(
    target: MinerTarget,
    params: RoundParams,
    previous: PogResult | None,
    scoring: ScoringConfig,
    table: GpuTable,
    total_s: float,
    fraction: float = 1.0,
) -> PogResult:
    sample = rented_sample(previous, params.round_id, params, table, scoring) * fraction
    reason = (
        f"rented: {fraction:.0%} of GPUs in verified leases, liveness only"
        if sample > 0
        else "rented: never verified, no score"
    )
    return PogResult(
        round_id=params.round_id,
        uid=target.uid,
        hotkey=target.hotkey,
        ok=True,
        sample=sample,
        rented=True,
        reasons=(reason,),
        models=previous.models if previous else (),
        gpu_count=previous.gpu_count if previous else 0,
        tflops_fp16=previous.tflops_fp16 if previous else None,
        tflops_fp32=previous.tflops_fp32 if previous else None,
        timings={"total_s": total_s},
        block=params.block,
        created=time.time(),
        rented_fraction=fraction,
    )


def _failure(target: MinerTarget, params: RoundParams, reasons: tuple[str, ...], timings: dict) -> PogResult:
    log.info("uid=%d hotkey=%s failed: %s", target.uid, target.hotkey[:8], "; ".join(reasons))
    return PogResult(
        round_id=params.round_id,
        uid=target.uid,
        hotkey=target.hotkey,
        ok=False,
        sample=0.0,
        reasons=reasons,
        timings=timings,
        block=params.block,
        created=time.time(),
    )
