"""The verification pool: same verdicts as inline, only the validator's own parameters cross, survives a dead worker."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from compute.pog import Prover, VerifyPool, choose_openings, new_challenge, verify
from compute.pog.merkle import MerkleTree, hash_rows
from compute.pog.verify_pool import RecomputeJob, jobs_for, run_job
from compute.pog.wire import B64Array, Commitment, GpuOpening, Opening, RowProof


@pytest.fixture(scope="module")
def honest():
    challenge = new_challenge("fp32", 64, 8192, 64, 2, rng=np.random.default_rng(30))
    prover = Prover("cpu")
    commitment = prover.commit(challenge)
    request = choose_openings(challenge, rng=np.random.default_rng(31))
    return challenge, commitment, request, prover.open(request)


def _wrong_row(challenge, commitment, request, opening):
    """A consistent commitment to a row that is off by 1.0 in every entry (Merkle fine, maths not)."""
    cid = bytes.fromhex(challenge.challenge_id)
    rows = np.zeros((challenge.m, challenge.p), np.float32)
    proofs = []
    for i in request.rows[0]:
        rows[i] = 1.0
    tree = MerkleTree(hash_rows(cid, 0, rows))
    for i in request.rows[0]:
        proofs.append(
            RowProof(index=i, row=B64Array.from_numpy(rows[i]), path=[h.hex() for h in tree.path(i)])
        )
    per_gpu = [GpuOpening(rows=proofs), *opening.per_gpu[1:]]
    roots = [tree.root.hex(), *commitment.roots[1:]]
    return (
        Commitment(challenge_id=challenge.challenge_id, roots=roots),
        Opening(challenge_id=challenge.challenge_id, per_gpu=per_gpu),
    )


def test_jobs_carry_only_the_validators_parameters(honest) -> None:
    """What is pickled to a worker: ints and the validator's own strings, nothing the miner sent."""
    challenge, _, request, _ = honest
    jobs = jobs_for(challenge, request)
    assert len(jobs) == 2
    for job in jobs:
        fields = dataclasses.asdict(job)
        assert set(fields) == {"key", "precision", "n", "gpu", "rows", "cols"}
        assert fields["key"] == challenge.key and fields["n"] == challenge.n
        flat = [*job.rows, *(j for c in job.cols for j in c), job.n, job.gpu]
        assert all(type(v) is int for v in flat)


@pytest.mark.slow
def test_pool_verdicts_equal_inline_verdicts(honest) -> None:
    challenge, commitment, request, opening = honest
    bad_commitment, bad_opening = _wrong_row(challenge, commitment, request, opening)

    async def main():
        pool = VerifyPool(2, min_elements=0)  # every job to the workers
        try:
            good = await pool.verify(challenge, commitment, request, opening)
            bad = await pool.verify(challenge, bad_commitment, request, bad_opening)
            return good, bad, pool.jobs_pooled, pool.pids()
        finally:
            pool.close()

    good, bad, pooled, pids = asyncio.run(main())
    assert good == verify(challenge, commitment, request, opening) and good.ok
    assert bad == verify(challenge, bad_commitment, request, bad_opening) and not bad.ok
    assert "gpu 0" in bad.reasons[0] and pooled == 4 and len(pids) == 2


def _priority(_: RecomputeJob) -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def test_workers_run_at_lower_priority_and_small_jobs_stay_inline(honest) -> None:
    challenge, commitment, request, opening = honest

    async def main():
        pool = VerifyPool(1, nice=7)
        try:
            await pool.verify(challenge, commitment, request, opening)  # 8192-long: under the minimum
            inline = pool.jobs_inline, pool.pids()
            job = jobs_for(challenge, request)[0]
            nice = await asyncio.get_running_loop().run_in_executor(pool._pool(), _priority, job)
            return inline, nice
        finally:
            pool.close()

    (inline, pids), nice = asyncio.run(main())
    assert (inline, pids) == (2, [])  # both GPUs inline, no pool started for them
    assert nice == os.getpriority(os.PRIO_PROCESS, 0) + 7


@pytest.mark.slow
def test_a_dead_worker_costs_nothing_but_a_restart(honest) -> None:
    challenge, commitment, request, opening = honest

    async def main():
        pool = VerifyPool(1, min_elements=0)
        try:
            first = await pool.verify(challenge, commitment, request, opening)
            for pid in pool.pids():
                os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.5)
            second = await pool.verify(challenge, commitment, request, opening)
            third = await pool.verify(challenge, commitment, request, opening)
            return first, second, third, pool.jobs_pooled
        finally:
            pool.close()

    first, second, third, pooled = asyncio.run(main())
    assert first.ok and second.ok and third.ok
    assert pooled >= 4  # the first and third rounds in workers (the second may have been inline)


def test_run_job_is_the_recomputation(honest) -> None:
    from compute.pog.recompute import expected_for

    challenge, _, request, _ = honest
    for job, want in zip(jobs_for(challenge, request), expected_for(challenge, request), strict=True):
        assert np.array_equal(run_job(job), want)


def test_negative_workers_is_an_error() -> None:
    with pytest.raises(ValueError, match="workers must be >= 0"):
        VerifyPool(-1)


PARENT = """
import asyncio, sys
from compute.pog import VerifyPool

async def main():
    pool = VerifyPool(2)
    await pool.start()
    print(*pool.pids(), flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.slow
def test_workers_of_a_validator_killed_with_minus_9_do_not_outlive_it() -> None:
    """kill -9 runs no atexit: the pool's workers must notice their validator is gone and end,
    not stay (~250 MB each) until the machine restarts."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        workers += [int(pid) for pid in parent.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(workers) == 2 and all(_alive(pid) for pid in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in workers), "a pool worker outlived its validator"
    finally:
        parent.kill()
        parent.wait(10)
        for pid in workers:
            if _alive(pid):  # the failure above must not leave them behind either
                os.kill(pid, signal.SIGKILL)
