"""Which miners of a round share a lockstep window.

Every miner a round tests is proven inside a lockstep window (``compute.validator.lockstep``): its
memory chain starts at the window's common moment, together with every other seat's. A window holds
at most ``size`` miners (``--validator.concurrency``: what the validator keeps open at once); a
group that must be proven at one moment (suspects: hotkeys sharing an IP or SSH host, and every
same-device group of the last round) always shares one window, even past ``size``. When every due
miner fits one window, the round is one window, and the whole round is proven at one moment.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


__all__ = ["pack_windows"]
