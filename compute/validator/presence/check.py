"""One presence check: every miner with a proven capacity, at one moment, residency only.

Per miner, untimed (each step bounded by seconds above its measured round trip): specs (which
hosts, which GPUs), a validation lease per host (GPUs no rental holds; validation leases share GPUs
with each other, so another validator's proof never makes an honest miner busy), SSH and the
worker, ``info`` twice. Then, at the lockstep window's gates (``compute.validator.lockstep``), every
seat builds the memory proof's matrix, sized from the model the validator PROVED (the miner's last
verified result), and every chain starts at the window's one moment. A GPU is present when both
memory judges pass and its residency interval contains the moment. GPUs the miner could not lease
because renters hold them are present only when verified rental receipts hold them AND the small
proof beside their tenants (``check.beside``, at the same seat and moment) finds them there.
Anything else (refused, unreachable, not ready in time, late, wrong, a "busy" nobody can verify, a
receipt whose GPU is elsewhere) is absence. The verdict is the share of the miner's proven GPUs
found present, in [0, 1].

No throughput is measured and nothing is scored here; the verdicts go to the presence log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compute.protocol import GpuSpec, MachineSpecs
from compute.scoring import GpuTable
from compute.store import PogResult, PresenceEntry
from compute.validator.check.beside import RentedGpus, prove_beside
from compute.validator.check.context import MinerCheck
from compute.validator.check.lease import fetch_specs, leased, open_session
from compute.validator.check.prove import MAX_GPUS_TESTED, bounded, measure_info
from compute.validator.context import ValidatorContext
from compute.validator.failures import MinerFailed, MinerRented
from compute.validator.lockstep.gate import SeatGate
from compute.validator.lockstep.residency import exclusivity, residency_of
from compute.validator.lockstep.window import Seat, Window
from compute.validator.params import MinerTarget, RoundParams
from compute.validator.proofs.depth import DepthRejected, prove_memory
from compute.validator.session.pog_session import PogSessionError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Unit:
    """One lease of a check: a host of a multi-host miner (``name``), or the whole machine (None)."""

    name: str | None
    gpus: tuple[GpuSpec, ...]
    sizing: tuple[str, ...]  # the model per GPU the matrix is sized from (the proven one)


@dataclass(frozen=True)
class UnitOutcome:
    present: int  # GPUs proven present (a machine without GPUs: 1 device; rented: beside the tenants)
    reason: str = ""


def expected_devices(previous: PogResult) -> int:
    """The devices a miner's credit rests on: its credited GPUs (one for a machine without GPUs)."""
    count = previous.credited_gpus if previous.credited_gpus is not None else previous.gpu_count
    return max(1, count)


def units_of(specs: MachineSpecs, previous: PogResult, table: GpuTable) -> list[Unit]:
    """The leases to take: one per up host, else one for the machine; matrices sized from the
    models the validator identified (a claimed name only where nothing was identified)."""
    claimed = specs.gpus[:MAX_GPUS_TESTED]
    position = {gpu.index: i for i, gpu in enumerate(claimed)}

    def sizing(gpus: Sequence[GpuSpec]) -> tuple[str, ...]:
        names = []
        for gpu in gpus:
            i = position[gpu.index]
            proven = previous.models[i] if i < len(previous.models) else ""
            names.append(proven if table.resolve_name(proven) else gpu.name)
        return tuple(names)

    if not specs.hosts:
        return [Unit(None, tuple(claimed), sizing(claimed))]
    units = []
    for host in specs.hosts:
        if host.up:
            gpus = tuple(g for g in claimed if g.index in set(host.gpus))
            units.append(Unit(host.name, gpus, sizing(gpus)))
    return units


async def check_presence(
    ctx: ValidatorContext,
    targets: Sequence[MinerTarget],
    previous: Mapping[int, PogResult],
    params: RoundParams,
    *,
    label: str = "presence",
) -> list[PresenceEntry]:
    """Every target with a proven capacity (``previous``), checked at one moment under ``params``
    (the validator's ``ctx``: its client, GPU table and scoring config, and its timed lock)."""
    due = [t for t in targets if t.uid in previous]
    async with Window(label, prepare_s=params.lockstep.prepare_s, timed_lock=ctx.timed_lock) as window:
        seats = {t.uid: window.seat(f"uid {t.uid}") for t in due}
        window.start()
        entries = await asyncio.gather(
            *(
                _miner(
                    MinerCheck(
                        ctx.client, t, params, ctx.table, ctx.scoring, previous[t.uid], seat=seats[t.uid]
                    )
                )
                for t in due
            )
        )
    present = sum(1 for e in entries if e.fraction > 0)
    log.info("%s: %d of %d miners present at the window's moment", label, present, len(entries))
    return list(entries)


async def _miner(check: MinerCheck) -> PresenceEntry:
    assert check.seat is not None and check.previous is not None
    target, seat, previous = check.target, check.seat, check.previous
    try:
        return await asyncio.wait_for(_present(check, seat, previous), check.params.miner_timeout)
    except asyncio.TimeoutError:
        return _entry(check, 0.0, f"absent: no verdict within {check.params.miner_timeout:.0f}s")
    except MinerFailed as exc:
        return _entry(check, 0.0, f"absent: {exc}")
    except Exception as exc:  # the per-miner boundary: one miner never breaks the check
        log.exception("uid=%d presence check crashed", target.uid)
        return _entry(check, 0.0, f"absent: validator error: {type(exc).__name__}: {exc}")
    finally:
        seat.leave()


async def _present(check: MinerCheck, seat: Seat, previous: PogResult) -> PresenceEntry:
    specs = await fetch_specs(check)
    units = units_of(specs, previous, check.table)
    seats = [seat.fork(f"uid {check.uid} {u.name or 'machine'}") for u in units]
    seat.leave()  # the units' seats stand in for the miner's
    rented = RentedGpus(check)  # receipts fetched once, when a unit is refused as rented
    outcomes = await asyncio.gather(*(_unit(check, u, s, rented) for u, s in zip(units, seats, strict=True)))
    present = sum(o.present for o in outcomes)
    reasons = [o.reason for o in outcomes if o.reason]
    expected = expected_devices(previous)
    fraction = min(1.0, present / expected)
    return _entry(check, fraction, "; ".join(reasons) or f"present: {present} of {expected} proven devices")


async def _unit(check: MinerCheck, unit: Unit, seat: Seat, rented: RentedGpus) -> UnitOutcome:
    """One lease of the check: its devices present at the window's moment, or why not."""
    where = f"host {unit.name}: " if unit.name else ""
    try:
        async with leased(check, len(unit.gpus), host=unit.name, note=False) as lease:
            try:
                return await _resident(check, unit, seat, lease)
            except BaseException:
                seat.leave()  # before the lease's release: the window stops waiting for this seat now
                raise
    except MinerRented:  # its GPUs in verified rentals, proven beside their tenants at this seat
        count = await rented.take(len(unit.gpus))
        if count <= 0:
            return UnitOutcome(0, f"absent: {where}held GPUs in no verified rental")
        beside = await prove_beside(check, unit.sizing[len(unit.sizing) - count :], seat, host=unit.name)
        if beside.reason:
            return UnitOutcome(beside.present, f"absent: {where}{beside.reason}")
        return UnitOutcome(
            beside.present, f"{where}{beside.present} rented GPU(s) present beside their tenants"
        )
    except (MinerFailed, PogSessionError, DepthRejected) as exc:
        return UnitOutcome(0, reason=f"absent: {where}{exc}")
    finally:
        seat.leave()


async def _resident(check: MinerCheck, unit: Unit, seat: Seat, lease) -> UnitOutcome:  # noqa: ANN001
    params, lockstep = check.params, check.params.lockstep
    session = await bounded(
        open_session(lease, params), check.bound(lockstep.bootstrap_s), "SSH and worker start"
    )
    async with session:
        devices, rtt = await measure_info(session, check)
        if unit.gpus and len(devices) < len(unit.gpus):
            raise MinerFailed(f"worker sees {len(devices)} devices, {len(unit.gpus)} GPUs leased")
        memory = await prove_memory(  # a far miner's chain gets more passes (the round trip never subtracted)
            check, session, list(unit.sizing), max(1, len(unit.gpus)), rtt, gate=SeatGate(seat)
        )
    if memory is None or memory.started_at is None:
        return UnitOutcome(0, reason="absent: no memory proof for its model, presence unprovable")
    moment = seat.window.moment
    verdict = exclusivity(residency_of(memory, rtt, cpu=not unit.gpus), moment or memory.started_at, lockstep)
    if not verdict.ok:
        return UnitOutcome(0, reason=f"absent: {verdict.reason}")
    if not memory.all_proven:
        return UnitOutcome(0, reason="absent: memory not proven resident: " + "; ".join(memory.reasons[:1]))
    return UnitOutcome(max(1, len(unit.gpus)))


def _entry(check: MinerCheck, fraction: float, reason: str) -> PresenceEntry:
    if fraction < 1.0:
        log.info("uid=%d hotkey=%s presence %.2f: %s", check.uid, check.target.hotkey[:8], fraction, reason)
    return PresenceEntry(check.uid, check.target.hotkey, fraction, reason)


__all__ = ["Unit", "check_presence", "expected_devices", "units_of"]
