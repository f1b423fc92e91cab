"""One device, one reward: correlate the machines behind all hotkeys a validator tests.

Identifiers, per hotkey, from one round: the GPU UUIDs (reported in specs and by the worker inside
the lease), the host keys and SSH endpoints of the leases the validator reached, and the axon IP.

- *Same device* (strong): two hotkeys showing the same GPU UUID, lease host key or lease SSH
  endpoint. The device is credited once: the hotkey that showed it first (in this validator's
  memory; then the best sample, then the lowest uid) keeps its sample, the others get 0, and every
  member's verdict names the others.
- *Suspects* (weak): hotkeys sharing an axon IP or an SSH host (a NAT, a data centre, or one box).
  They, and every same-device group, are tested AT THE SAME MOMENT next round: a GPU cannot hold
  two memory challenges at once, so shared hardware fails one of the simultaneous proofs.
- *Refuted* (``refuted_uuids``): a GPU UUID is the miner's word, and anyone who rents a machine
  can read its UUIDs. When every hotkey showing one UUID was tested in one window, the window's
  simultaneous memory proofs decide instead: each that held its own resident matrix there has a
  device of its own, each that failed earns 0 by its own failure, so the UUID counts against none
  of them. A squatter who showed a newcomer's UUIDs first cannot keep the newcomer at 0, not even
  by failing on purpose beside it; one device behind two hotkeys still earns once (one of the two
  simultaneous proofs fails). A holder that passed without a memory proof (a rented check) keeps
  the UUID as evidence. Identifiers the validator observed itself (lease host keys and SSH
  endpoints) are never refuted this way.

Pure functions plus a small in-memory registry; no I/O. Identifiers the miner reports can only
lower its score (a collision), never raise it. See docs/threat-model.md for what a miner with full
control of NVML can still do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

from compute.store import PogResult


@dataclass(frozen=True)
class Fingerprint:
    uid: int
    hotkey: str
    axon_ip: str
    gpu_uuids: frozenset[str] = frozenset()
    host_keys: frozenset[str] = frozenset()
    ssh_endpoints: frozenset[str] = frozenset()

    def strong(self) -> set[str]:
        return (
            {f"GPU {u}" for u in self.gpu_uuids}
            | {f"host key SHA256:{hashlib.sha256(k.encode()).hexdigest()[:16]}" for k in self.host_keys}
            | {f"SSH endpoint {e}" for e in self.ssh_endpoints}
        )

    def without_uuids(self, uuids: Collection[str]) -> Fingerprint:
        return replace(self, gpu_uuids=self.gpu_uuids - frozenset(uuids))

    def weak(self) -> set[str]:
        hosts = {e.rsplit(":", 1)[0] for e in self.ssh_endpoints}
        return {f"ip {self.axon_ip}"} | {f"ip {h}" for h in hosts}


@dataclass(frozen=True)
class SharedDevice:
    """Hotkeys found on one device; ``keeper`` is the one credited."""

    uids: tuple[int, ...]
    keeper: int
    evidence: tuple[str, ...]


def _groups(prints: Sequence[Fingerprint], key: str) -> list[tuple[list[Fingerprint], set[str]]]:
    """Connected components of hotkeys sharing any identifier of the ``key`` kind."""
    parent = list(range(len(prints)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    shared: dict[str, set[int]] = {}
    for i, fp in enumerate(prints):
        for ident in getattr(fp, key)():
            shared.setdefault(ident, set()).add(i)
            if ident in owner:
                parent[find(i)] = find(owner[ident])
            else:
                owner[ident] = i
    members: dict[int, list[int]] = {}
    for i in range(len(prints)):
        members.setdefault(find(i), []).append(i)
    out = []
    for group in members.values():
        if len(group) < 2:
            continue
        evidence = {ident for ident, holders in shared.items() if len(holders & set(group)) > 1}
        out.append(([prints[i] for i in group], evidence))
    return out


@dataclass
class DeviceRegistry:
    """Which hotkey showed an identifier first (so a later hotkey copying it cannot evict it)."""

    first: dict[str, str] = field(default_factory=dict)

    def shared_devices(self, prints: Sequence[Fingerprint], samples: dict[int, float]) -> list[SharedDevice]:
        devices = []
        for members, evidence in _groups(prints, "strong"):
            device = self._verdict(members, evidence, samples)
            keeper = next(fp.hotkey for fp in members if fp.uid == device.keeper)
            for ident in evidence:  # the keeper stays the keeper in later rounds
                self.first.setdefault(ident, keeper)
            devices.append(device)
        for fp in prints:
            for ident in fp.strong():
                self.first.setdefault(ident, fp.hotkey)
        return devices

    def _verdict(
        self, members: list[Fingerprint], evidence: set[str], samples: dict[int, float]
    ) -> SharedDevice:
        def rank(fp: Fingerprint) -> tuple[int, float, int]:
            earliest = any(self.first.get(ident) == fp.hotkey for ident in evidence)
            return (0 if earliest else 1, -samples.get(fp.uid, 0.0), fp.uid)

        keeper = min(members, key=rank)
        return SharedDevice(tuple(sorted(fp.uid for fp in members)), keeper.uid, tuple(sorted(evidence)))


def refuted_uuids(
    prints: Sequence[Fingerprint], windows: Iterable[frozenset[int]], decided: Collection[int]
) -> dict[str, frozenset[int]]:
    """GPU UUIDs shown by several hotkeys all tested in one window, each of which the window's
    memory proof decided (``decided``: it held its resident matrix there, or failed): the
    simultaneous proofs, not the UUID, say which devices are distinct. Per UUID, the uids that
    showed it."""
    holders: dict[str, set[int]] = {}
    for fp in prints:
        for uuid in fp.gpu_uuids:
            holders.setdefault(uuid, set()).add(fp.uid)
    settled = set(decided)
    together = [w for w in windows if len(w) > 1]
    return {
        uuid: frozenset(uids)
        for uuid, uids in holders.items()
        if len(uids) > 1 and uids <= settled and any(uids <= w for w in together)
    }


def suspect_groups(prints: Sequence[Fingerprint]) -> list[frozenset[int]]:
    """Uids to test at the same moment next round: weak or strong correlations."""
    groups = [frozenset(fp.uid for fp in members) for members, _ in _groups(prints, "weak")]
    groups += [frozenset(fp.uid for fp in members) for members, _ in _groups(prints, "strong")]
    return groups


def credit_once(results: Iterable[PogResult], devices: Sequence[SharedDevice]) -> list[PogResult]:
    """Zero every member of a shared device except its keeper, with the verdict saying so."""
    verdicts: dict[int, tuple[SharedDevice, bool]] = {}
    for device in devices:
        for uid in device.uids:
            verdicts[uid] = (device, uid == device.keeper)
    out = []
    for result in results:
        found = verdicts.get(result.uid)
        if found is None:
            out.append(result)
            continue
        device, kept = found
        others = tuple(uid for uid in device.uids if uid != result.uid)
        why = ", ".join(device.evidence[:3])
        if kept:
            reason = f"one device with uids {list(others)} ({why}): credited once, here"
            out.append(replace(result, shared_with=others, reasons=result.reasons + (reason,)))
        else:
            reason = f"shared device: same machine as uid {device.keeper} ({why}); credited once, there"
            out.append(replace(result, sample=0.0, shared_with=others, reasons=(reason,) + result.reasons))
    return out


__all__ = ["DeviceRegistry", "Fingerprint", "SharedDevice", "credit_once", "refuted_uuids", "suspect_groups"]
