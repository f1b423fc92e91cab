"""Test a multi-host miner: one validation lease per host, all hosts proven at the same moment.

``MachineSpecs.hosts`` (the miner's word) says which hosts exist and which GPU indices each has.
Every host it reports up gets its own lease (``Requirements.host``, all that host's GPUs, proven
together by ``prove``, the round's single-machine proof) and is scored as one machine; the proofs
run concurrently so one device shown as two hosts must hold two challenges at once. The miner's
result is :func:`compute.validator.hostproof.combine_hosts` of them. A host whose lease is refused,
unreachable or fails its proof adds 0; when EVERY host is fully rented, the miner goes the rented
path of a single machine (``rented_step``). Nothing here touches the store or the chain.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import asyncssh

from compute.protocol import GpuSpec, HostSpec, LeaseInfo, MachineSpecs
from compute.scoring import GpuTable
from compute.store import PogResult
from compute.transport import MinerClient
from compute.validator.evidence import Measured, scored_result
from compute.validator.failures import MinerFailed, MinerRented
from compute.validator.hostproof import MAX_HOSTS_TESTED, HostProof, combine_hosts
from compute.validator.lease_steps import allocate, released
from compute.validator.params import MinerTarget, RoundParams, failed_result
from compute.validator.truth import MinerNotes

log = logging.getLogger(__name__)

Prove = Callable[
    [LeaseInfo, asyncssh.SSHKey, RoundParams, GpuTable, list, MachineSpecs, "PogResult | None"],
    Awaitable[Measured],
]


class AllHostsRented(Exception):
    """Every host refused its GPU lease for lack of capacity (the caller checks rentals)."""


async def prove_hosts(
    client: MinerClient,
    target: MinerTarget,
    params: RoundParams,
    table: GpuTable,
    previous: PogResult | None,
    notes: MinerNotes,
    specs: MachineSpecs,
    prove: Prove,
    max_gpus: int,
) -> PogResult:
    """The miner's result: the sum of its hosts proven now (raises ``AllHostsRented``)."""
    up = [h for h in specs.hosts if h.up][:MAX_HOSTS_TESTED]
    down = [h.name for h in specs.hosts if not h.up]
    if not up:
        raise MinerFailed(f"every host of this miner reports down: {', '.join(down)}")
    runs = [_one_host(client, target, params, table, previous, notes, specs, h, prove, max_gpus) for h in up]
    outcomes = await asyncio.gather(*runs)
    if all(isinstance(o, MinerRented) for o in outcomes):
        raise AllHostsRented()
    proofs = [
        o if isinstance(o, HostProof) else _rented_host(target, params, h)
        for o, h in zip(outcomes, up, strict=True)
    ]
    result = combine_hosts(proofs, down)
    log.info(
        "uid=%d hosts %s: sample %.4g",
        target.uid,
        {name: round(value, 4) for name, value in result.hosts.items()},
        result.sample,
    )
    return result


def _claimed(specs: MachineSpecs, host: HostSpec, max_gpus: int) -> list[GpuSpec]:
    wanted = set(host.gpus)
    return [g for g in specs.gpus if g.index in wanted][:max_gpus]


async def _one_host(
    client: MinerClient,
    target: MinerTarget,
    params: RoundParams,
    table: GpuTable,
    previous: PogResult | None,
    notes: MinerNotes,
    specs: MachineSpecs,
    host: HostSpec,
    prove: Prove,
    max_gpus: int,
) -> HostProof | MinerRented:
    """One host's proof; a failure is an unproven host (never an exception), rented is returned."""
    started = time.monotonic()
    claimed = _claimed(specs, host, max_gpus)
    key = asyncssh.generate_private_key("ssh-ed25519")
    keys: frozenset[str] = frozenset()
    endpoints: frozenset[str] = frozenset()
    try:
        lease = await allocate(client, target, params, key, len(claimed), host=host.name)
        if lease.ssh is not None:
            notes.saw_lease(lease.ssh.host, lease.ssh.port, lease.ssh.host_key)
            keys = frozenset({" ".join(lease.ssh.host_key.split()[:2])})
            endpoints = frozenset({f"{lease.ssh.host}:{lease.ssh.port}"})
        if lease.host not in (None, host.name):
            raise MinerFailed(f"asked for host {host.name}, the lease runs on {lease.host}")
        async with released(client, target, lease):
            host_specs = specs.model_copy(update={"gpus": claimed, "hosts": []})
            measured = await prove(lease, key, params, table, claimed, host_specs, previous)
    except MinerRented as exc:
        return exc
    except MinerFailed as exc:
        return HostProof(
            host.name, failed_result(target, params, (f"host {host.name}: {exc}",)), keys, endpoints
        )
    notes.gpu_uuids.update(measured.uuids)
    measured.timings["total_s"] = time.monotonic() - started
    return HostProof(host.name, scored_result(target, params, measured, table, previous), keys, endpoints)


def _rented_host(target: MinerTarget, params: RoundParams, host: HostSpec) -> HostProof:
    """A host whose GPUs are all rented while others were proven: 0 this round (not proven now)."""
    return HostProof(
        host.name, failed_result(target, params, (f"host {host.name}: no free GPU (rented), not proven",))
    )


__all__ = ["AllHostsRented", "prove_hosts"]
