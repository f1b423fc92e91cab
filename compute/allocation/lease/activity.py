"""What "idle" means for a lease, judged from the miner's own measurements (pure, no I/O).

A backend samples a lease (``Activity``): cumulative counters the miner reads from the host
(CPU seconds of the lease's cgroup or processes, bytes through its network interface), the SSH
sessions logged in at that moment, and the highest utilisation of its GPUs. ``judge`` compares two
samples. A lease is idle over an interval only when *every* signal says so:

- no SSH session logged in at either sample (sessions are seen at a moment; a session open at
  the start of an interval may have lasted until just before its end),
- CPU below ``cpu_cores`` (default 0.02 of one core) on average over the interval,
- fewer than ``net_bytes_per_s`` (1 KiB/s: 60 KiB a minute) in and out over the interval
  (where measured; a handful of logins or health probes stay well below it),
- every GPU of the lease below ``gpu_percent`` (5 %) at both samples.

Anything unknown counts as activity: a GPU lease whose utilisation cannot be read, a counter
that went backwards (a restart), a sample missing or late (the miner was down, the loop stalled).
So a measurement failure can only keep a lease running, never end it; and whatever a renter's
software could do to these readings from inside its lease (start processes, send traffic, stay
logged in) can only make its own lease look busier.

Deliberately not here: sampling (the backends), the clock or stopping leases (the idle watch).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Activity:
    """One sample of a lease, taken by the miner; ``at`` is a monotonic time in seconds."""

    at: float
    cpu_s: float | None  # cumulative CPU seconds (None: not measured)
    net_bytes: int | None  # cumulative bytes received + sent (None: not measured, e.g. host network)
    sessions: int  # SSH sessions logged in now
    gpu_percent: float | None  # highest utilisation of the lease's GPUs now (None: unknown or no GPU)
    gpus: int = 0  # GPUs the lease holds (with gpu_percent None: unknown, so busy)


@dataclass(frozen=True)
class IdleThresholds:
    cpu_cores: float = 0.02
    net_bytes_per_s: float = 1024.0
    gpu_percent: float = 5.0
    max_gap_s: float = 300.0  # samples further apart than this say nothing: busy


_DEFAULT = IdleThresholds()


def judge(before: Activity, now: Activity, limits: IdleThresholds = _DEFAULT) -> tuple[bool, str]:
    """(idle, what was seen) for the interval from ``before`` to ``now``."""
    elapsed = now.at - before.at
    if elapsed <= 0 or elapsed > limits.max_gap_s:
        return False, f"no continuous measurement ({elapsed:.0f} s between samples)"
    # sessions and GPU use are read at a moment: both ends of the interval must be quiet
    if now.sessions > 0 or before.sessions > 0:
        return False, f"{max(now.sessions, before.sessions)} ssh session(s)"
    if now.gpus or before.gpus:
        if now.gpu_percent is None or (before.gpus and before.gpu_percent is None):
            return False, "gpu use unknown"
        busiest = max(now.gpu_percent, before.gpu_percent or 0.0)
        if busiest > limits.gpu_percent:
            return False, f"gpu {busiest:.0f}%"
    if now.cpu_s is None or before.cpu_s is None:
        return False, "cpu use unknown"
    used = now.cpu_s - before.cpu_s
    if used < 0:
        return False, "cpu counter restarted"
    if used / elapsed > limits.cpu_cores:
        return False, f"cpu {used / elapsed:.2f} cores"
    if now.net_bytes is not None and before.net_bytes is not None:
        moved = now.net_bytes - before.net_bytes
        if moved < 0:
            return False, "network counter restarted"
        if moved / elapsed > limits.net_bytes_per_s:
            return False, f"network {moved / elapsed / 1024:.1f} KiB/s"
    return True, "idle"


__all__ = ["Activity", "IdleThresholds", "judge"]
