"""Test one miner: validation lease -> SSH -> PoG (fp16, fp32) -> verify -> identify -> score.

``check_miner`` never raises: every failure (unreachable miner, refused lease, SSH trouble, worker
garbage or silence, failed verification, per-miner timeout) becomes a ``PogResult`` with
``ok=False``, ``sample=0`` and the reasons. The lease is always released (``finally``), also on
error and cancellation. Retries (with backoff, bounded by the caller's deadline) cover only a miner
that could not be reached before a lease existed; a failed proof is final.

The steps live in their own modules: the lease (``lease_steps``), the GEMM proof (``gemm_step``,
sized by ``sizing``), the in-depth proofs (``depth_step``), the rented path (``rented_step``) and
the scored result (``evidence``); a multi-host miner is proven host by host (``hosts_step``). Rented machines (the miner refuses a GPU validation lease for lack
of capacity) must show receipts; a verified one gets a liveness lease and a decayed score of its
last verification; a machine never verified scores 0. With ``canary`` set, the test first rents the
miner as a renter would (``compute.validator.canary``). What the test saw beyond PoG goes into the
caller's ``MinerNotes``. Nothing here touches the store or the chain.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncssh

from compute.protocol import LeaseInfo, MachineSpecs
from compute.scoring import GpuTable, ScoringConfig
from compute.store import PogResult
from compute.transport import MinerClient
from compute.validator.canary import run_canary
from compute.validator.depth import DepthRejected
from compute.validator.depth_step import prove_depth
from compute.validator.evidence import Measured, scored_result
from compute.validator.failures import MinerFailed, MinerRented, MinerUnreachable
from compute.validator.gemm_step import PRECISIONS, prove_gemm
from compute.validator.hosts_step import AllHostsRented, prove_hosts
from compute.validator.lease_steps import allocate, fetch_specs, open_session, release_stale, released
from compute.validator.params import MinerTarget, RoundParams, failed_result, round_params
from compute.validator.pog_session import PogSessionError
from compute.validator.rented_step import check_rented, rented_sample
from compute.validator.sizing import CHUNK, MAX_N, challenge_size
from compute.validator.truth import MinerNotes

__all__ = [
    "CHUNK",
    "MAX_GPUS_TESTED",
    "MAX_N",
    "PRECISIONS",
    "MinerTarget",
    "RoundParams",
    "challenge_size",
    "check_miner",
    "rented_sample",
    "round_params",
]

log = logging.getLogger(__name__)

MAX_GPUS_TESTED = 16
_RETRY_BACKOFF_S = 2.0


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
        except MinerUnreachable as exc:
            attempt += 1
            canary = False  # one canary per test, even when the test is retried
            if attempt > params.retries:
                return _failure(target, params, (str(exc),), {})
            wait = _RETRY_BACKOFF_S * 2 ** (attempt - 1)
            log.info("uid=%d unreachable (%s), retry %d in %.0fs", target.uid, exc, attempt, wait)
            await asyncio.sleep(wait)
        except MinerFailed as exc:
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
    specs = await fetch_specs(client, target)
    await release_stale(client, target)
    claimed = specs.gpus[:MAX_GPUS_TESTED]
    notes.claimed_gpus = len(claimed)
    notes.gpu_uuids.update(gpu.uuid for gpu in claimed if gpu.uuid)  # self-reported: may only lower
    if canary:
        timeout = min(60.0, params.miner_timeout)
        notes.canary = await run_canary(client, target.endpoint, target.hotkey, len(claimed), timeout)
    key = asyncssh.generate_private_key("ssh-ed25519")
    if specs.hosts:  # a multi-host miner: each host proven on its own lease, credited their sum
        try:
            return await prove_hosts(
                client, target, params, table, previous, notes, specs, _prove, MAX_GPUS_TESTED
            )
        except AllHostsRented:
            return await check_rented(client, target, params, table, scoring, previous, notes, key, started)
    try:
        lease = await allocate(client, target, params, key, len(claimed))
    except MinerRented:
        return await check_rented(client, target, params, table, scoring, previous, notes, key, started)
    if lease.ssh is not None:
        notes.saw_lease(lease.ssh.host, lease.ssh.port, lease.ssh.host_key)
    async with released(client, target, lease):
        measured = await _prove(lease, key, params, table, claimed, specs, previous)
    notes.gpu_uuids.update(measured.uuids)
    measured.timings["total_s"] = time.monotonic() - started
    return scored_result(target, params, measured, table, previous)


async def _prove(
    lease: LeaseInfo,
    key: asyncssh.SSHKey,
    params: RoundParams,
    table: GpuTable,
    claimed: list,
    specs: MachineSpecs,
    previous: PogResult | None,
) -> Measured:
    """The GEMM proof, then the in-depth proofs, in one SSH session inside the lease."""
    session = await open_session(lease, key, params)
    async with session:
        try:
            measured, together = await prove_gemm(session, params, table, claimed, specs)
            await prove_depth(session, params, table, claimed, specs, previous, measured, together)
        except PogSessionError as exc:
            raise MinerFailed(str(exc)) from None
        except DepthRejected as exc:
            raise MinerFailed(str(exc)) from None
    return measured


def _failure(target: MinerTarget, params: RoundParams, reasons: tuple[str, ...], timings: dict) -> PogResult:
    log.info("uid=%d hotkey=%s failed: %s", target.uid, target.hotkey[:8], "; ".join(reasons))
    return failed_result(target, params, reasons, timings)
