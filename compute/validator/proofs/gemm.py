"""The GEMM proof step: committed, opened and verified products per precision, timed by the validator.

The clock runs from the challenge to the commitment only (warm-up is off the clock); the openings
are chosen after the commitment, so a worker cannot know which rows will be checked. Each precision
is timed as the best of two short runs of half the inner size (issue 24, robust verdicts): a jitter
spike in one run does not lower an honest figure, and since both runs must verify and the faster one
counts, slowing either can only lower it.
"""

from __future__ import annotations

from compute.pog import Challenge, Precision, choose_openings, new_challenge
from compute.protocol import MachineSpecs
from compute.scoring import GpuTable
from compute.validator.failures import MinerFailed
from compute.validator.params import RoundParams
from compute.validator.proofs.evidence import Measured
from compute.validator.proofs.offloaded import verify_opening
from compute.validator.proofs.sizing import CHUNK, RUNS, challenge_size, expected_tflops, run_size
from compute.validator.session.pog_session import PogSession

PRECISIONS: tuple[Precision, ...] = ("fp16", "fp32")


async def prove_gemm(
    session: PogSession,
    params: RoundParams,
    table: GpuTable,
    claimed: list,
    specs: MachineSpecs,
    measured: Measured | None = None,
) -> tuple[Measured, tuple[Challenge, float]]:
    """Throughput per precision; also the first challenge and its time (the scaling step's baseline).

    ``measured``: what the test already measured in this session (its devices from ``info``)."""
    gpu_count = max(1, len(claimed))
    if measured is None:
        devices = await session.info(params.miner_timeout)
        if claimed and len(devices) < gpu_count:
            raise MinerFailed(f"worker sees {len(devices)} devices, miner claims {gpu_count} GPUs")
        measured = Measured({}, {}, devices, gpu_count if claimed else 0)
    together: tuple[Challenge, float] | None = None
    for precision in PRECISIONS:
        m, n, p = challenge_size(params, precision, expected_tflops(table, specs, precision))
        half = run_size(n)
        runs = [new_challenge(precision, m, half, p, gpu_count, chunk=min(CHUNK, half)) for _ in range(RUNS)]
        timed = [(await one_precision(session, challenge, params), challenge) for challenge in runs]
        elapsed, challenge = min(timed, key=lambda run: run[0])
        measured.tflops[precision] = 2.0 * m * half * p / elapsed / 1e12
        measured.timings[f"{precision}_s"] = elapsed
        together = together or (challenge, elapsed)
    assert together is not None  # PRECISIONS is not empty
    return measured, together


async def one_precision(session: PogSession, challenge: Challenge, params: RoundParams) -> float:
    """Seconds from challenge to commitment, once the opened rows verified (else ``MinerFailed``)."""
    await session.warm_up(challenge, params.miner_timeout)  # off the clock: first products run slow
    timed = await session.commit(challenge, params.miner_timeout)
    request = choose_openings(challenge, params.rows_per_gpu, params.cols_per_row)  # after the commitment
    line = await session.open_rows_line(request, challenge.p, params.miner_timeout)
    verdict = await verify_opening(line, "open", challenge, timed.commitment, request, params.verify_workers)
    if not verdict.ok:
        raise MinerFailed(f"{challenge.precision} proof rejected: " + "; ".join(verdict.reasons[:3]))
    return max(timed.elapsed_s, 1e-6)
