"""A multi-host miner's score: each host proven on its own, the miner credited the sum of its hosts.

A miner with a hosts file lists its hosts in ``MachineSpecs.hosts``; the validator takes one
validation lease per host (``Requirements.host``, all of that host's GPUs, proven together as in
the multi-GPU proof) and runs the hosts' proofs AT THE SAME MOMENT, so one GPU shown as two hosts
has to hold two resident challenges at once and fails one. Each host's proof is scored as one
machine (``scored_result``); :func:`combine_hosts` then credits:

- an unproven host (refused, unreachable, failed proof, or listed down): 0;
- CPU-only hosts reached at one SSH address: once (nothing proves a CPU shown twice is two);
- hosts showing the same device (a GPU UUID, a lease host key or SSH endpoint, the strong evidence
  of :mod:`compute.validator.fleet.dedup`, reused here across the hosts of one miner): once, to the best
  of them; the others 0, with a reason naming the host credited;
- the miner: the sum of what its hosts were credited.

The host list, names and down flags are the miner's word: they may only lower the score (a host
the miner calls down is not tested and adds 0; claiming more hosts adds nothing unless each proves
distinct hardware). Pure: no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from compute.store import PogResult
from compute.validator.fleet.dedup import DeviceRegistry, Fingerprint

MAX_HOSTS_TESTED = 8


@dataclass(frozen=True)
class HostProof:
    """What one host's validation lease showed; ``result.ok`` False means unproven."""

    name: str
    result: PogResult
    host_keys: frozenset[str] = frozenset()
    ssh_endpoints: frozenset[str] = frozenset()


def credited_samples(proofs: Sequence[HostProof]) -> dict[str, tuple[float, str]]:
    """Host -> (credited sample, note). One device shown as several hosts is credited once."""
    out = {p.name: (0.0, f"host {p.name}: not proven ({_why(p.result)})") for p in proofs if not p.result.ok}
    proven = [p for p in proofs if p.result.ok]
    prints = [
        Fingerprint(i, p.name, "", frozenset(p.result.gpu_uuids), p.host_keys, p.ssh_endpoints)
        for i, p in enumerate(proven)
    ]
    samples = {i: p.result.sample for i, p in enumerate(proven)}
    dropped: dict[int, str] = {}
    for device in DeviceRegistry().shared_devices(prints, samples):
        keeper = proven[device.keeper].name
        why = ", ".join(device.evidence[:2])
        for i in device.uids:
            if i != device.keeper:
                dropped[i] = (
                    f"host {proven[i].name}: same device as host {keeper} ({why}); credited once, there"
                )
    dropped.update(_cpu_only_twins(proven, samples, dropped))
    for i, p in enumerate(proven):
        if i in dropped:
            out[p.name] = (0.0, dropped[i])
        else:
            out[p.name] = (
                p.result.sample,
                f"host {p.name}: {p.result.gpu_count} GPU(s) proven, {p.result.sample:.4g}",
            )
    return out


def _cpu_only_twins(
    proven: Sequence[HostProof], samples: dict[int, float], dropped: dict[int, str]
) -> dict[int, str]:
    """CPU-only hosts reached at one SSH address: credited once (no resident-memory proof tells a
    CPU shown twice from two machines, so one address counts as one machine)."""
    by_address: dict[str, list[int]] = {}
    for i, p in enumerate(proven):
        if i in dropped or p.result.gpu_count > 0:
            continue
        for address in sorted({e.rsplit(":", 1)[0] for e in p.ssh_endpoints})[:1]:
            by_address.setdefault(address, []).append(i)
    out = {}
    for address, members in by_address.items():
        keeper = min(members, key=lambda i: (-samples[i], i))
        for i in members:
            if i != keeper:
                out[i] = (
                    f"host {proven[i].name}: CPU-only at {address} like host {proven[keeper].name}; "
                    "credited once, there"
                )
    return out


def _why(result: PogResult) -> str:
    return result.reasons[0][:120] if result.reasons else "failed"


def combine_hosts(proofs: Sequence[HostProof], down: Sequence[str] = ()) -> PogResult:
    """The miner's result for the round: the sum of its credited hosts (``proofs`` non-empty).

    ``down``: hosts the miner listed as down (not tested; they add 0 and are named).
    """
    if not proofs:
        raise ValueError("combine_hosts needs at least one host proof")
    credit = credited_samples(proofs)
    counted = [p for p in proofs if credit[p.name][0] > 0]
    base = max(counted, key=lambda p: p.result.sample).result if counted else proofs[0].result
    gpus = sum(p.result.gpu_count for p in counted)
    notes = [credit[p.name][1] for p in proofs] + [f"host {name}: down (miner's report), 0" for name in down]
    hosts = {p.name: credit[p.name][0] for p in proofs} | {name: 0.0 for name in down}
    return replace(
        base,
        ok=bool(counted),
        sample=sum(credit[p.name][0] for p in proofs),
        reasons=tuple(notes) + (() if counted else base.reasons),
        models=tuple(m for p in counted for m in p.result.models),
        gpu_count=gpus,
        credited_gpus=sum((p.result.credited_gpus or 0) for p in counted) if counted else 0,
        tflops_fp16=_weighted(counted, "tflops_fp16"),
        tflops_fp32=_weighted(counted, "tflops_fp32"),
        gpu_uuids=tuple(dict.fromkeys(u for p in proofs for u in p.result.gpu_uuids)),
        timings={f"{p.name}.{k}": v for p in proofs for k, v in p.result.timings.items()},
        hosts=hosts,
    )


def _weighted(proofs: Sequence[HostProof], attr: str) -> float | None:
    """Per-GPU figure over the credited hosts, weighted by their GPU count (display only)."""
    pairs = [(getattr(p.result, attr), max(1, p.result.gpu_count)) for p in proofs]
    pairs = [(v, w) for v, w in pairs if v is not None]
    if not pairs:
        return None
    return statistics.fmean([v for v, _ in pairs], weights=[w for _, w in pairs])


__all__ = ["MAX_HOSTS_TESTED", "HostProof", "combine_hosts", "credited_samples"]
