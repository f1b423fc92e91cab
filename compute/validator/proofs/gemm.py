"""The GEMM proof step: committed, opened and verified products per precision, timed by the validator.

The clock runs from the challenge to the commitment only (warm-up is off the clock); the openings
are chosen after the commitment, so a worker cannot know which rows will be checked. Each precision
is timed as the best of two short runs of half the inner size: a jitter
spike in one run does not lower an honest figure, and since both runs must verify and the faster one
counts, slowing either can only lower it. Each run is made long enough that the round trip measured
in the session is at most ``distance_share`` of it (``proofs.distance``: the first run sized from its
warm-up, the next from the run just timed), and at least ``min_timed_s`` long at any distance (so
near and far runs carry their fixed costs alike); the round trip is never subtracted.
"""

from __future__ import annotations

from compute.pog import Challenge, Precision, choose_openings, new_challenge
from compute.protocol import MachineSpecs
from compute.validator.failures import MinerFailed
from compute.validator.params import RoundParams
from compute.validator.proofs.checked import ProofCheck
from compute.validator.proofs.distance import stretched_n
from compute.validator.proofs.evidence import Measured
from compute.validator.proofs.offloaded import verify_opening
from compute.validator.proofs.sizing import CHUNK, MAX_N, RUNS, challenge_size, expected_tflops, run_size
from compute.validator.session.pog_session import PogSession

PRECISIONS: tuple[Precision, ...] = ("fp16", "fp32")


async def prove_gemm(
    check: ProofCheck,
    session: PogSession,
    claimed: list,
    specs: MachineSpecs,
    measured: Measured | None = None,
) -> tuple[Measured, tuple[Challenge, float]]:
    """Throughput per precision under ``check``'s round parameters and GPU table; also the first
    challenge and its time (the scaling step's baseline).

    ``measured``: what the test already measured in this session (its devices from ``info``, the
    round trip ``timings["rtt_s"]`` that sizes the runs)."""
    params, table = check.params, check.table
    gpu_count = max(1, len(claimed))
    if measured is None:
        devices = await session.info(params.miner_timeout)
        if claimed and len(devices) < gpu_count:
            raise MinerFailed(f"worker sees {len(devices)} devices, miner claims {gpu_count} GPUs")
        measured = Measured({}, {}, devices, gpu_count if claimed else 0)
    rtt = measured.timings.get("rtt_s", 0.0)
    together: tuple[Challenge, float] | None = None
    for precision in PRECISIONS:
        m, n, p = challenge_size(params, precision, expected_tflops(table, specs, precision))
        half = run_size(n)
        challenge = new_challenge(precision, m, half, p, gpu_count, chunk=min(CHUNK, half))
        challenge, elapsed = await one_precision(session, challenge, params, rtt)
        best = (2.0 * m * challenge.n * p / elapsed / 1e12, challenge, elapsed)
        for _ in range(RUNS - 1):  # sized from the run just timed (a better guide than the warm-up)
            grown = stretched_n(
                challenge.n, elapsed - rtt, rtt, params.distance_share, CHUNK, MAX_N, params.min_timed_s
            )
            challenge = new_challenge(precision, m, grown, p, gpu_count, chunk=challenge.chunk)
            challenge, elapsed = await one_precision(session, challenge, params, rtt, warm=False)
            best = max(best, (2.0 * m * challenge.n * p / elapsed / 1e12, challenge, elapsed), key=_tflops)
        measured.tflops[precision], fastest, seconds = best
        measured.timings[f"{precision}_s"] = seconds
        together = together or (fastest, seconds)
    assert together is not None  # PRECISIONS is not empty
    return measured, together


def _tflops(run: tuple[float, Challenge, float]) -> float:
    return run[0]


async def one_precision(
    session: PogSession, challenge: Challenge, params: RoundParams, rtt_s: float = 0.0, warm: bool = True
) -> tuple[Challenge, float]:
    """The challenge timed and its seconds from challenge to commitment, once the opened rows verified
    (else ``MinerFailed``). With ``warm``, a warm-up at the challenge's shape first (off the clock),
    and the challenge grown so the round trip is at most ``distance_share`` of its work."""
    warmed = await session.warm_up(challenge, params.miner_timeout) if warm else None  # off the clock
    if warmed is not None:  # a refused warm-up gets no stretching: more of the round trip, lower figures
        n = stretched_n(
            challenge.n, warmed - rtt_s, rtt_s, params.distance_share, CHUNK, MAX_N, params.min_timed_s
        )
        if n != challenge.n:
            challenge = new_challenge(
                challenge.precision, challenge.m, n, challenge.p, challenge.gpu_count, chunk=challenge.chunk
            )
    timed = await session.commit(challenge, params.miner_timeout)
    request = choose_openings(challenge, params.rows_per_gpu, params.cols_per_row)  # after the commitment
    line = await session.open_rows_line(request, challenge.p, params.miner_timeout)
    verdict = await verify_opening(line, "open", challenge, timed.commitment, request, params.verify_workers)
    if not verdict.ok:
        raise MinerFailed(f"{challenge.precision} proof rejected: " + "; ".join(verdict.reasons[:3]))
    return challenge, max(timed.elapsed_s, 1e-6)
