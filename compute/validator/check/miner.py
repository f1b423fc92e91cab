"""Test one miner: validation lease -> SSH -> PoG (fp16, fp32) -> verify -> identify -> score.

``check_miner`` never raises: every failure of the miner (unreachable miner, refused lease, SSH
trouble on every try, worker garbage or silence, failed verification, per-miner timeout) becomes a
``PogResult`` with ``ok=False``, ``sample=0`` and the reasons. A failure of the validator itself (an
exception of its own code) is never the miner's zero: the test returns None (not tested this round,
logged with the reason) and the round neither scores nor decays the miner. The lease is always
released, also on error and cancellation (``lease.leased``). Retries (with backoff, bounded by the
caller's deadline) cover a miner that could not be reached before a lease existed and a session
whose channel broke before anything was timed (``lease.open_session``); a failed proof is final.

Each attempt is one ``MinerCheck`` (``context``) that every step takes: the lease (``lease``), the
proof inside it (``prove``: the memory proof at the lockstep window's moment, then GEMM and the other
in-depth proofs), the rented path (``rented``) and, for a
multi-host miner, one lease and proof per host (``hosts``). Rented machines (the miner refuses a GPU
validation lease for lack of capacity) must show receipts; the GPUs of verified ones are proven
present beside their tenants (``beside``), and those present earn their part of the machine's last
whole verification (decaying once it is old); a machine never verified scores 0. Canary rentals are
not part of a test: the round runs them at their own moments (``compute.validator.fleet.canaries``).
What the test saw beyond PoG goes into the caller's ``MinerNotes``. Nothing here touches the store
or the chain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import replace
from typing import TypeVar

from compute.store import PogResult
from compute.validator.check.context import MinerCheck
from compute.validator.check.hosts import AllHostsRented, prove_hosts
from compute.validator.check.lease import fetch_specs, leased, release_stale
from compute.validator.check.prove import MAX_GPUS_TESTED, prove_in_lease
from compute.validator.check.rented import check_rented
from compute.validator.failures import MinerFailed, MinerRented, MinerUnreachable
from compute.validator.lockstep.window import Seat, Window

log = logging.getLogger(__name__)

_RETRY_BACKOFF_S = 2.0
T = TypeVar("T")


async def check_miner(check: MinerCheck, deadline: float | None = None) -> PogResult | None:
    """Test ``check.target`` within ``check.params.miner_timeout`` (and before ``deadline``,
    monotonic); None when the validator itself failed (not the miner's zero). ``check`` is the
    test's template: each attempt is a copy of it started anew, all sharing its notes.
    ``check.basis``: the miner's last verification of the whole machine (what rented GPUs of a partly
    rented machine are credited from; defaults to ``check.previous`` when that one covered the
    whole machine). ``check.seat``: the test's seat in the round's lockstep window; without one the
    test is a window of its own (its hosts, if any, share it)."""
    if check.seat is not None:
        try:
            return await _check(check, check.seat, deadline)
        finally:
            check.seat.leave()
    async with Window(f"uid {check.uid}", prepare_s=check.params.lockstep.prepare_s) as window:
        seat = window.seat(f"uid {check.uid}")
        window.start()
        try:
            return await _check(replace(check, seat=seat), seat, deadline)
        finally:
            seat.leave()


async def _check(template: MinerCheck, seat: Seat, deadline: float | None) -> PogResult | None:
    target, params = template.target, template.params
    attempt = 0
    while True:
        budget = params.miner_timeout
        if deadline is not None:
            budget = min(budget, deadline - time.monotonic())
        if budget <= 1:
            return _failure(template, ("round deadline reached before the test",), {})
        check = replace(template, started=time.monotonic())  # this attempt (its own clock and round trip)
        try:
            return await within(_attempt(check), budget, seat, deadline)
        except asyncio.TimeoutError:
            return _failure(check, (f"miner test exceeded {budget:.0f}s",), {})
        except MinerUnreachable as exc:
            attempt += 1
            if attempt > params.retries:
                return _failure(check, (str(exc),), {})
            wait = _RETRY_BACKOFF_S * 2 ** (attempt - 1)
            log.info("uid=%d unreachable (%s), retry %d in %.0fs", target.uid, exc, attempt, wait)
            await asyncio.sleep(wait)
        except MinerFailed as exc:
            return _failure(check, (str(exc),), {"total_s": check.elapsed()})
        except Exception as exc:  # the per-miner boundary: one miner never breaks the round
            log.exception(
                "uid=%d hotkey=%s not tested this round: validator error %s: %s (not the miner's zero)",
                target.uid,
                target.hotkey[:8],
                type(exc).__name__,
                exc,
            )
            return None


async def within(step: Awaitable[T], budget: float, seat: Seat, deadline: float | None = None) -> T:
    """``step`` within ``budget`` seconds of its own time: the time its seat spends waiting at the
    window's gates for other miners is not charged to it (never past ``deadline``, monotonic)."""
    task = asyncio.ensure_future(step)
    started, waited = time.monotonic(), seat.waited()
    try:
        while True:
            end = started + budget + (seat.waited() - waited)
            if deadline is not None:
                end = min(end, deadline)
            done, _ = await asyncio.wait({task}, timeout=max(0.0, end - time.monotonic()))
            if done:
                return task.result()
            if time.monotonic() >= started + budget + (seat.waited() - waited) or (
                deadline is not None and time.monotonic() >= deadline
            ):
                raise asyncio.TimeoutError
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _attempt(check: MinerCheck) -> PogResult:
    specs = await fetch_specs(check)
    await release_stale(check)
    claimed = specs.gpus[:MAX_GPUS_TESTED]
    check.notes.claimed_gpus = len(claimed)
    check.notes.gpu_uuids.update(gpu.uuid for gpu in claimed if gpu.uuid)  # self-reported: may only lower
    try:
        if specs.hosts:  # a multi-host miner: each host proven on its own lease, credited their sum
            return await prove_hosts(check, specs)
        async with leased(check, len(claimed)) as lease:
            measured = await prove_in_lease(check, lease, claimed, specs)
    except MinerRented:
        return await check_rented(check, claimed, specs)
    except AllHostsRented as exc:
        return await check_rented(check, claimed, specs, exc.hosts)
    measured.timings["total_s"] = check.elapsed()
    return check.scored(measured)


def _failure(check: MinerCheck, reasons: tuple[str, ...], timings: dict) -> PogResult:
    log.info("uid=%d hotkey=%s failed: %s", check.uid, check.target.hotkey[:8], "; ".join(reasons))
    return check.failed(reasons, timings)


__all__ = ["MAX_GPUS_TESTED", "check_miner"]
