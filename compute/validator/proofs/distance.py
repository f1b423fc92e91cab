"""Distance: a far miner's verdict where a near one's is, without a round trip the miner could fake.

Every timed interval the validator measures holds one round trip: the challenge travels out, the
answer travels back. The validator NEVER subtracts a round trip from it: a miner can answer a ping
as late as it likes, so a round trip "measured in the session" is the miner's to inflate, and
subtracting it would pay a near miner for pretending to be far. Instead the validator measures the
round trip in the same session (``measure_round_trip``: the fastest of a few pings on the timing
process's clock) and makes the timed work long enough that this round trip is at most
``distance_share`` of it: more GEMM inner size (``stretched_n``), more dependent memory passes
(``passes_for``). Then:

- an honest miner far away loses at most ``distance_share`` of a timed figure (2 % by default);
- a miner that fakes distance only lengthens its own work: every figure stays (work / time on the
  validator's clock), which no delay of the miner can raise;
- a miner that hides how long its work takes (a slow or refused warm-up) gets less stretching, so
  more of the round trip in its interval: lower, never higher.

A floor (``min_timed_s``, the same at every distance) keeps a near miner's timed GEMM from being
a few milliseconds long: there the interval's fixed costs (the commitment's line, hashing, the
session's turn-around) weigh on the figure while a far miner's stretched run carries them over
seconds, so the near one was under-measured (a CPU product of ~10 ms read ~0.76 of its far figure).
With every run at least the floor long, near and far measure work of comparable size, and only the
round trip's share (at most ``distance_share``) separates them.

Pure arithmetic plus one session call; sizes are bounded (``MAX_TIMED_S``, the generators' limits).
"""

from __future__ import annotations

import math

from compute.validator.session.pog_session import PogSession

PINGS = 5
MAX_TIMED_S = 30.0  # the longest a stretched timed interval is made (beyond: distance costs more)
HEADROOM = 1.3  # measured here: a CPU commit takes ~0.75 of its warm-up at the same shape
MAX_STRETCH = 64.0  # bounds the validator's own cost (verification is O(n) per sampled entry)


async def measure_round_trip(session: PogSession, timeout: float, pings: int = PINGS) -> float:
    """The fastest of ``pings`` round trips to the worker (seconds, the timing process's clock)."""
    return min([await session.ping(timeout) for _ in range(max(1, pings))])


def stretch_factor(compute_s: float, rtt_s: float, share: float, floor_s: float = 0.0) -> float:
    """How much longer the timed work must be so ``rtt_s`` is at most ``share`` of it and it lasts at
    least ``floor_s`` whatever the distance: >= 1, aiming ``HEADROOM`` above (a warm-up runs slower
    than the timed product), at most ``MAX_TIMED_S`` of work and ``MAX_STRETCH`` x (a miner hiding
    its compute time only stretches to the bound)."""
    want = max(floor_s, rtt_s / share if rtt_s > 0 and share > 0 else 0.0)
    if want <= 0:
        return 1.0
    want = min(want * HEADROOM, MAX_TIMED_S)
    return min(MAX_STRETCH, max(1.0, want / max(compute_s, 1e-3)))


def stretched_n(
    n: int, compute_s: float, rtt_s: float, share: float, chunk: int, max_n: int, floor_s: float = 0.0
) -> int:
    """GEMM inner size: ``n`` (predicted ``compute_s`` of work, from the warm-up) grown by
    ``stretch_factor``, in whole chunks, at most ``max_n``."""
    factor = stretch_factor(compute_s, rtt_s, share, floor_s)
    if factor <= 1.0:
        return n
    return max(n, min(max_n, math.ceil(n * factor / chunk) * chunk))


def passes_for(base: int, pass_s: float, rtt_s: float, share: float, most: int) -> int:
    """Dependent passes of a memory proof whose pass takes ``pass_s`` (planned): ``base``, or enough
    that the round trip is at most ``share`` of the chain, at most ``most``."""
    if rtt_s <= 0 or pass_s <= 0:
        return base
    return max(base, min(most, math.ceil(rtt_s / share / pass_s)))


__all__ = [
    "HEADROOM",
    "MAX_STRETCH",
    "MAX_TIMED_S",
    "PINGS",
    "measure_round_trip",
    "passes_for",
    "stretch_factor",
    "stretched_n",
]
