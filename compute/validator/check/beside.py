"""Rented GPUs proven there beside their tenants: a small memory proof in a lease that shares them.

A renter's GPU cannot be leased for the full proof (a rental shares its GPUs with nobody), and a
signed receipt proves a contract, not a GPU: a miner "renting" its GPU to a key it controls (two
coldkeys of one owner cannot be told apart) could keep the device elsewhere and still show a live
lease. So every round that credits rented time, and every presence check, asks the miner for a
lease *beside* the tenants (``purpose="beside"``: the miner shares the rented GPUs) and runs the
memory proof in it at the lockstep window's moment, like every other seat: sized to
``depth.beside_share`` of the proven model's memory (1 %), its rounds sized for
``depth.beside_margin`` at the table's bandwidth (a tenant taking most of the bandwidth does not
make an honest GPU look like a regenerating one), the same mathematics, time judges and residency
judge. What it takes from a tenant: 1 % of the GPU's memory (and the worker's context) for
seconds, a chain of at most 256 passes over it (about 0.1 s of an H100) per check. A rented GPU is
present only where its part of the proof passes; a refused, unreachable, late or wrong proof is
absence, and an absent rented GPU earns nothing.

The lease's SSH endpoint and host key and the GPU UUIDs its worker reports go into the test's notes,
as every lease's do: one machine shown under two hotkeys is credited once (``fleet.dedup``).

What it deliberately does not do: decide which GPUs are rented (receipts do), or score.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from compute.protocol import GpuSpec
from compute.scoring import GpuTable
from compute.store import PogResult
from compute.validator.check.context import MinerCheck
from compute.validator.check.lease import Lease, leased, open_session
from compute.validator.check.prove import bounded, measure_info
from compute.validator.failures import MinerFailed, MinerRented
from compute.validator.lockstep.gate import SeatGate
from compute.validator.lockstep.residency import exclusivity, residency_of
from compute.validator.lockstep.window import Seat
from compute.validator.proofs.depth import DepthRejected, prove_memory
from compute.validator.rentals.receipts import RentalCheck, Renters, check_rentals
from compute.validator.session.pog_session import PogSessionError


@dataclass(frozen=True)
class Beside:
    """What the proof beside the tenants found: ``present`` rented GPUs, or why fewer."""

    present: int
    reason: str = ""


class RentedGpus:
    """The GPUs a miner's verified rentals hold: its receipts fetched once, when a first lease is
    refused as rented (recorded in the test's notes), and handed out to the leases refused so, so
    the proofs beside the tenants never cover more GPUs than verified rentals hold."""

    def __init__(self, check: MinerCheck) -> None:
        self.check = check
        self._lock = asyncio.Lock()
        self._checked: RentalCheck | None = None
        self._left = 0

    async def rentals(self) -> RentalCheck:
        async with self._lock:
            if self._checked is None:
                check, params = self.check, self.check.params
                self._checked = await check_rentals(
                    check.client,
                    check.target.endpoint,
                    check.target.hotkey,
                    Renters(params.trusted_renters, params.renter_coldkeys, params.own_canaries),
                    time.time(),
                    params.rental_probe_timeout,
                )
                self._left = self._checked.rented_gpus
                check.notes.rentals = self._checked
                for held in self._checked.alive:
                    check.notes.saw_lease(held.host, held.port, held.host_key)
            return self._checked

    async def take(self, wanted: int) -> int:
        """Up to ``wanted`` of the verified rented GPUs not handed out yet."""
        await self.rentals()
        async with self._lock:
            got = max(0, min(wanted, self._left))
            self._left -= got
            return got


def proven_models(
    basis: PogResult | None, claimed: Sequence[GpuSpec], rented: int, table: GpuTable
) -> tuple[str, ...]:
    """The model each rented GPU is sized from: the table model the machine's last whole
    verification identified (the machine's last GPUs: the validation lease takes the first ones),
    else the claimed name (as the presence checks size theirs)."""
    names = []
    for index in range(max(0, len(claimed) - rented), len(claimed)):
        proven = basis.models[index] if basis is not None and index < len(basis.models) else ""
        names.append(proven if table.resolve_name(proven) else claimed[index].name)
    return tuple(names)


async def prove_beside(
    check: MinerCheck, names: Sequence[str], seat: Seat | None, host: str | None = None
) -> Beside:
    """The ``len(names)`` rented GPUs proven beside their tenants at ``seat``'s window moment (on
    ``host`` of a multi-host miner); never raises for the miner's failures (they are absence)."""
    where = f"host {host}: " if host else ""
    if not names:
        if seat is not None:
            seat.leave()
        return Beside(0, f"{where}no rented GPU to prove")
    try:
        async with leased(check, len(names), host=host, beside=True) as lease:  # its fingerprint noted
            try:
                return await _resident(check, lease, names, seat)
            except BaseException:
                if seat is not None:
                    seat.leave()  # before the lease's release: the window stops waiting for it now
                raise
    except MinerRented:
        return Beside(0, f"{where}no lease beside the tenants of its rented GPUs")
    except (MinerFailed, PogSessionError, DepthRejected) as exc:
        return Beside(0, f"{where}rented GPUs not proven beside their tenants: {exc}")
    finally:
        if seat is not None:
            seat.leave()


async def _resident(check: MinerCheck, lease: Lease, names: Sequence[str], seat: Seat | None) -> Beside:
    params, lockstep = check.params, check.params.lockstep
    session = await bounded(
        open_session(lease, params), check.bound(lockstep.bootstrap_s), "SSH and worker start"
    )
    async with session:
        devices, rtt = await measure_info(session, check)
        if len(devices) < len(names):
            raise MinerFailed(f"worker sees {len(devices)} devices beside the tenants, {len(names)} rented")
        check.notes.gpu_uuids.update(d.uuid for d in devices[: len(names)] if d.uuid)  # may only lower
        gate = SeatGate(seat) if seat is not None else None
        memory = await prove_memory(check, session, list(names), len(names), rtt, gate, beside=True)
    if memory is None or memory.started_at is None:
        return Beside(0, "rented GPUs not proven beside their tenants: no memory proof for their model")
    if seat is not None:
        moment = seat.window.moment
        verdict = exclusivity(residency_of(memory, rtt, cpu=False), moment or memory.started_at, lockstep)
        if not verdict.ok:
            return Beside(0, f"rented GPUs not there at the window's moment: {verdict.reason}")
    present = sum(memory.proven)
    why = "" if present == len(names) else "; ".join(memory.reasons[:1])
    return Beside(present, f"rented GPUs not proven beside their tenants: {why}" if why else "")


__all__ = ["Beside", "RentedGpus", "prove_beside", "proven_models"]
