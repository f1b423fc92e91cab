"""Test a multi-host miner: one validation lease per host, all hosts proven at the same moment.

``MachineSpecs.hosts`` (the miner's word) says which hosts exist and which GPU indices each has.
Every host it reports up gets its own lease (``Requirements.host``, all that host's GPUs, proven
together by ``prove_in_lease``, the round's single-machine proof) and is scored as one machine; the
proofs run concurrently so one device shown as two hosts must hold two challenges at once. The
miner's result is :func:`compute.validator.proofs.hostproof.combine_hosts` of them. A host whose
lease is refused, unreachable or fails its proof adds 0. A host whose lease is refused as rented
proves its rented GPUs beside their tenants at its seat (``beside``); when EVERY host is rented,
the miner goes the rented path (``rented``) with those proofs (else a rented host adds 0, as a host
not proven now). Nothing here touches the store or the chain.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from compute.protocol import GpuSpec, HostSpec, MachineSpecs
from compute.store import PogResult
from compute.validator.check.beside import Beside, RentedGpus, prove_beside
from compute.validator.check.context import MinerCheck
from compute.validator.check.lease import leased
from compute.validator.check.prove import MAX_GPUS_TESTED, prove_in_lease
from compute.validator.failures import MinerFailed, MinerRented
from compute.validator.lockstep.window import Seat
from compute.validator.proofs.hostproof import MAX_HOSTS_TESTED, HostProof, combine_hosts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RentedHost:
    """A host that refused its GPU lease as rented, and what the proof beside its tenants found."""

    host: str
    beside: Beside


class AllHostsRented(Exception):
    """Every host refused its GPU lease for lack of capacity; ``hosts``: their proofs beside the
    tenants (the caller credits the rentals)."""

    def __init__(self, hosts: list[RentedHost]) -> None:
        super().__init__("every host is rented")
        self.hosts = hosts


async def prove_hosts(check: MinerCheck, specs: MachineSpecs) -> PogResult:
    """The miner's result: the sum of its hosts proven now (raises ``AllHostsRented``)."""
    up = [h for h in specs.hosts if h.up][:MAX_HOSTS_TESTED]
    down = [h.name for h in specs.hosts if not h.up]
    if not up:
        raise MinerFailed(f"every host of this miner reports down: {', '.join(down)}")
    seats = [check.seat.fork(f"uid {check.uid} host {h.name}") if check.seat else None for h in up]
    if check.seat is not None:
        check.seat.leave()  # the hosts' seats stand in for the miner's in the lockstep window
    rented = RentedGpus(check)
    try:
        outcomes = await asyncio.gather(
            *(_one_host(check, specs, h, seat, rented) for h, seat in zip(up, seats, strict=True))
        )
    finally:
        for seat in seats:
            if seat is not None:
                seat.leave()
    held = [o for o in outcomes if isinstance(o, RentedHost)]
    if len(held) == len(outcomes):
        raise AllHostsRented(held)
    proofs = [
        o if isinstance(o, HostProof) else _rented_host(check, h) for o, h in zip(outcomes, up, strict=True)
    ]
    result = combine_hosts(proofs, down)
    log.info(
        "uid=%d hosts %s: sample %.4g",
        check.uid,
        {name: round(value, 4) for name, value in result.hosts.items()},
        result.sample,
    )
    return result


def _claimed(specs: MachineSpecs, host: HostSpec) -> list[GpuSpec]:
    wanted = set(host.gpus)
    return [g for g in specs.gpus if g.index in wanted][:MAX_GPUS_TESTED]


async def _one_host(
    check: MinerCheck, specs: MachineSpecs, host: HostSpec, seat: Seat | None, rented: RentedGpus
) -> HostProof | RentedHost:
    """One host's proof; a failure is an unproven host (never an exception), rented is returned.

    Every host has its own seat in the lockstep window: all of a miner's hosts hold their resident
    matrices at the window's one moment."""
    started = check.elapsed()
    claimed = _claimed(specs, host)
    keys: frozenset[str] = frozenset()
    endpoints: frozenset[str] = frozenset()
    try:
        async with leased(check, len(claimed), host=host.name) as lease:
            ssh = lease.info.ssh
            if ssh is not None:
                keys = frozenset({" ".join(ssh.host_key.split()[:2])})
                endpoints = frozenset({f"{ssh.host}:{ssh.port}"})
            if lease.info.host not in (None, host.name):
                raise MinerFailed(f"asked for host {host.name}, the lease runs on {lease.info.host}")
            host_specs = specs.model_copy(update={"gpus": claimed, "hosts": []})
            measured = await prove_in_lease(check, lease, claimed, host_specs, seat)
    except MinerRented:  # its verified rented GPUs beside their tenants, at its own seat
        count = await rented.take(len(claimed))
        if count > 0:
            names = [gpu.name for gpu in claimed][len(claimed) - count :]
            return RentedHost(host.name, await prove_beside(check, names, seat, host=host.name))
        if seat is not None:
            seat.leave()
        return RentedHost(host.name, Beside(0, f"host {host.name}: its held GPUs are in no verified rental"))
    except MinerFailed as exc:
        if seat is not None:
            seat.leave()
        return HostProof(host.name, check.failed((f"host {host.name}: {exc}",)), keys, endpoints)
    measured.timings["total_s"] = check.elapsed() - started
    return HostProof(host.name, check.scored(measured), keys, endpoints)


def _rented_host(check: MinerCheck, host: HostSpec) -> HostProof:
    """A host whose GPUs are all rented while others were proven: 0 this round (not proven now)."""
    return HostProof(host.name, check.failed((f"host {host.name}: no free GPU (rented), not proven",)))


__all__ = ["AllHostsRented", "RentedHost", "prove_hosts"]
