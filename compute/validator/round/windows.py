"""Which miners of a round share a lockstep window.

Every miner a round tests is proven inside a lockstep window (``compute.validator.lockstep``): its
memory chain starts at the window's common moment, together with every other seat's. A window holds
at most ``size`` miners (``--validator.concurrency``: what the validator keeps open at once); a
group that must be proven at one moment (suspects: hotkeys sharing an IP or SSH host, and every
same-device group of the last round) always shares one window, even past ``size``. When every due
miner fits one window, the round is one window, and the whole round is proven at one moment; a
round that was one window over every queryable miner is also a presence check (``result_presence``).

Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from compute.store import PogResult, PresenceEntry
from compute.validator.params import MinerTarget


def pack_windows(
    targets: Sequence[MinerTarget], groups: Iterable[frozenset[int]], size: int
) -> list[list[MinerTarget]]:
    """``targets`` split into windows of at most ``size`` (groups kept whole), in the targets' order."""
    size = max(1, size)
    by_uid = {t.uid: t for t in targets}
    units: list[list[MinerTarget]] = []
    placed: set[int] = set()
    merged = _merge([g & set(by_uid) for g in groups])
    for target in targets:  # each unit: a whole group, or one miner, in order of first appearance
        if target.uid in placed:
            continue
        group = next((g for g in merged if target.uid in g), frozenset({target.uid}))
        unit = [t for t in targets if t.uid in group]
        placed.update(group)
        units.append(unit)
    windows: list[list[MinerTarget]] = []
    for unit in units:
        if windows and len(windows[-1]) + len(unit) <= size:
            windows[-1].extend(unit)
        else:
            windows.append(list(unit))
    return windows


def _merge(groups: list[frozenset[int]]) -> list[frozenset[int]]:
    """Overlapping groups as one (a uid in two groups joins them)."""
    merged: list[frozenset[int]] = []
    for group in groups:
        if not group:
            continue
        overlapping = [m for m in merged if m & group]
        merged = [m for m in merged if not m & group] + [frozenset(group.union(*overlapping))]
    return merged


def result_presence(result: PogResult) -> PresenceEntry:
    """A round's result as a presence verdict (when the round was one window over every miner).

    Present: verified, credited (not zeroed as a shared device) and its memory proven resident at the
    window's moment; a rented machine: the share of its GPUs in verified rentals; else absent."""
    if result.ok and result.rented:
        fraction, why = result.rented_fraction or 0.0, "rented under verified leases"
    elif result.ok and result.sample > 0 and (result.mem_proven_gb or 0.0) > 0:
        fraction, why = 1.0, "present at the round's window"
    else:
        fraction, why = 0.0, "absent: " + (result.reasons[0] if result.reasons else "not proven")
    return PresenceEntry(result.uid, result.hotkey, fraction, why)


__all__ = ["pack_windows", "result_presence"]
