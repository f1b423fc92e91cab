"""Distance: a far honest miner is verified like a near one; faking distance
gains nothing. Real miners (signed app, embedded backend, real SSH, real worker) reached through the
userspace latency proxy (``compute/localnet/latency_proxy.py``: delay + jitter per direction).

Before: every timed interval held one round trip and the memory proof's 16 passes had to absorb
it: an honest card past ~0.35 s round trip lost its memory (an H100 paid the CPU floor), and a
small GEMM measured at 300 ms was a fraction of the same GEMM measured at 0 ms. Now the round trip
is measured in the session and the timed work is made long enough that it is at most
``distance_share`` of it; nothing is ever subtracted, so a miner that answers pings late only makes
its own work longer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from validator_helpers import small_params

from compute.scoring import ScoringConfig, load_gpu_table
from compute.validator import MinerCheck, MinerTarget, check_miner
from compute.validator.proofs.distance import passes_for, stretch_factor, stretched_n

PROXY = Path(__file__).resolve().parents[2] / "compute" / "localnet" / "latency_proxy.py"
TABLE = load_gpu_table()
SCORING = ScoringConfig()
SHARE = 0.1  # tests: the round trip at most 10 % of a timed interval (keeps the stretched GEMM ~3 s)
LONG_N = 1 << 17  # the long near check's inner size: its timed runs last about as long as the far ones
FLOOR = 1.0  # tests: every timed run >= 1 s near or far (a ms-long run reads 2-10x off on a shared CPU)


def far(rtt_ms: int, jitter: float = 0.2) -> tuple[str, ...]:
    return (sys.executable, str(PROXY), "--rtt-ms", str(rtt_ms), "--jitter", str(jitter), "{host}", "{port}")


def target(miner, uid: int = 1) -> MinerTarget:
    return MinerTarget(uid, miner.hotkey, miner.endpoint)


@pytest.mark.parametrize(
    ("compute_s", "rtt_s", "share", "factor"),
    [
        (3.0, 0.001, 0.02, 1.0),  # near: nothing to stretch
        (3.0, 0.3, 0.02, 6.5),  # 300 ms, 2 %: 15 s of work, x 1.3 headroom
        (0.1, 0.3, 0.1, 39.0),
        (0.5, 2.0, 0.01, 60.0),  # capped at MAX_TIMED_S = 30 s of work
        (0.0, 0.3, 0.02, 64.0),  # a compute time hidden (warm-up faster than a ping): MAX_STRETCH
        (3.0, 0.0, 0.02, 1.0),
    ],
)
def test_timed_work_grows_with_the_measured_round_trip(compute_s, rtt_s, share, factor) -> None:
    assert stretch_factor(compute_s, rtt_s, share) == pytest.approx(factor)


@pytest.mark.parametrize(
    ("compute_s", "rtt_s", "floor_s", "factor"),
    [
        (0.01, 0.0, 1.0, 64.0),  # a near 10 ms CPU product: stretched to the floor (bounded per run)
        (0.1, 0.001, 1.0, 13.0),  # near: the floor x 1.3 headroom, whatever the tiny round trip
        (0.1, 0.3, 1.0, 39.0),  # far: the round trip's share asks more than the floor
        (1.5, 0.0, 1.0, 1.0),  # an H100's run (~1.5 s) already lasts past the floor: no extra cost
        (0.1, 0.0, 60.0, 64.0),  # a floor past MAX_TIMED_S stretches at most to it (and MAX_STRETCH)
        (1.0, 0.0, 60.0, 30.0),
    ],
)
def test_every_timed_run_lasts_the_floor_near_or_far(compute_s, rtt_s, floor_s, factor) -> None:
    """A near miner's milliseconds-long run carried its fixed costs over a few ms and
    was under-measured beside a far one stretched over seconds; the floor, the same at every
    distance, gives both runs comparable work."""
    assert stretch_factor(compute_s, rtt_s, 0.1, floor_s) == pytest.approx(factor)


def test_stretching_only_grows_and_stays_in_bounds() -> None:
    assert stretched_n(8192, 0.7, 0.001, 0.02, 4096, 1 << 26) == 8192
    assert stretched_n(8192, 0.7, 0.3, 0.02, 4096, 1 << 26) == 229376  # x 21.4 x 1.3, whole chunks
    assert stretched_n(8192, 0.0, 9.9, 0.001, 4096, 1 << 18) == 1 << 18
    assert stretched_n(8192, 0.1, 0.0, 0.02, 4096, 1 << 26, floor_s=1.0) == 106496  # x 13
    assert passes_for(16, 0.019, 0.0, 0.02, 256) == 16
    assert passes_for(16, 0.019, 0.3, 0.02, 256) == 256  # H100 at 300 ms: 789 wanted, the most allowed
    assert passes_for(16, 0.5, 0.05, 0.02, 256) == 16


@pytest.mark.slow
async def test_a_far_honest_miner_is_verified_like_a_near_one(start_miner, validator_client) -> None:
    """300 ms round trip (+/- 20 % jitter per chunk and direction) against the same miner near.

    The CPU "GPU" of this test shares 2 cores with everything else running, and under load the same
    device measured near reads differently on short (~0.1 s) and long (~2 s, ``LONG_N``) work, either
    way round: CI read the far runs at 0.28-0.43 x the short near ones in one run, and at 0.34-0.57 x
    the long ones in another, where the short ones read 0.41-0.57 x the long. So the far figure is
    held to the lower of the two near ones, the device's own spread near at that moment (0.73-1.90
    in the seven pairs with both: CI, three busy loops, a quiet machine). Before the fix every far
    run measured ~1 % of near, whatever the yardstick. Measured again, at most three times, until
    one pair agrees."""
    miner = start_miner("honest")
    near_params = small_params(distance_share=SHARE, min_timed_s=FLOOR)
    long_params = small_params(distance_share=SHARE, min_timed_s=FLOOR, pog_n=LONG_N, miner_timeout=180.0)
    far_params = small_params(distance_share=SHARE, min_timed_s=FLOOR, lease_proxy=far(300))
    ratios = []
    for _ in range(3):
        near = await check_miner(MinerCheck(validator_client, target(miner), near_params, TABLE, SCORING))
        away = await check_miner(MinerCheck(validator_client, target(miner), far_params, TABLE, SCORING))
        assert near.ok and away.ok, away.reasons
        assert (
            near.mem_proven_gb and away.mem_proven_gb
        )  # memory proven at 300 ms too (before: lost past ~0.35 s)
        assert 0.2 < away.timings["rtt_s"] < 0.45 and near.timings["rtt_s"] < 0.1
        # the far GEMM runs were made ~rtt/share long, so the round trip is ~10 % of them (before:
        # the tiny product took ~ms and measured ~1 % of its throughput at 300 ms). Their time taken
        # together: the faster of the two counts, and this test's ms-long product lets the first
        # grow only MAX_STRETCH x from its warm-up (a production product's warm-up is long enough)
        # (a pair where load moved the ~20 s totals by more than the ~2 s stretch is measured again:
        # CI read a near total of 21.7 s and a far one of 23.0 s against a stretch of 2.2 s)
        stretched = away.timings["total_s"] > near.timings["total_s"] + 0.8 * away.timings["rtt_s"] / SHARE
        long = await check_miner(MinerCheck(validator_client, target(miner), long_params, TABLE, SCORING))
        assert long.ok, long.reasons
        assert long.timings["fp32_s"] > 0.5  # the long near runs are long, as the far ones are
        yardstick = min(near.tflops_fp32, long.tflops_fp32)
        ratios.append((away.tflops_fp32 / yardstick, near.tflops_fp32 / long.tflops_fp32, stretched))
        if ratios[-1][0] > 0.6 and stretched:
            return
    pytest.fail(f"far / the lower near, short near / long near in TFLOPS, far stretched, per pair: {ratios}")


@pytest.mark.slow
async def test_faking_distance_stretches_only_the_cheaters_own_work(start_miner, validator_client) -> None:
    """The cheat: answer pings 0.3 s late (look far, hoping for a round-trip allowance), answer the
    timed work at once. Nothing is subtracted: its figures are work over the validator's time."""
    honest = start_miner("honest")
    faker = start_miner("fakefar", cheat="fakefar")
    params = small_params(distance_share=SHARE, min_timed_s=FLOOR, miner_timeout=180.0)
    base = await check_miner(MinerCheck(validator_client, target(honest), params, TABLE, SCORING))
    # the same honest device really 300 ms away: its timed work is stretched to the cheater's size.
    # This test's near GEMM lasts ~10 ms, so fixed overheads weigh on it and a stretched run of the
    # same device measures up to ~2x more per second: the cheater is held to the honest device at
    # its own work size, never to a near figure that small work under-measures
    far_params = small_params(
        distance_share=SHARE, min_timed_s=FLOOR, miner_timeout=180.0, lease_proxy=far(300)
    )
    # and the same honest device near, on work as long as the stretched runs: the cheater is that
    # device with no round trip in its time (a CI run read it 2-3x the far honest one, whose proxy
    # shared the two cores, and 2x the short near one)
    long_params = small_params(distance_share=SHARE, min_timed_s=FLOOR, pog_n=LONG_N, miner_timeout=180.0)
    honest_figures, cheat_figures = [base.tflops_fp32], []
    near_totals = [base.timings["total_s"]]
    for _ in range(3):  # a shared CPU can halve one run (a CI run: cheat 1.42 x honest): measure again
        honest_far = await check_miner(
            MinerCheck(validator_client, target(honest), far_params, TABLE, SCORING)
        )
        long = await check_miner(MinerCheck(validator_client, target(honest), long_params, TABLE, SCORING))
        assert long.ok, long.reasons
        # the honest device near again, right before the cheater: a CI run's first near test took
        # 14.7 s under load and the cheater's later one 15.8, so the honest time is the least seen
        near = await check_miner(MinerCheck(validator_client, target(honest), params, TABLE, SCORING))
        assert near.ok, near.reasons
        near_totals.append(near.timings["total_s"])
        cheat = await check_miner(MinerCheck(validator_client, target(faker, 2), params, TABLE, SCORING))
        print(base.timings, honest_far.timings, cheat.timings)
        assert base.ok and honest_far.ok and cheat.ok, cheat.reasons
        assert cheat.timings["rtt_s"] >= 0.3  # it did look far
        # so its work was stretched, at its own cost (its runs taken together: the faster of its two
        # runs, the one that counts, may be the first, stretched at most MAX_STRETCH x from a warm-up
        # that looked instant beside its fake round trip)
        assert cheat.timings["total_s"] > min(near_totals) + 0.8 * 0.3 / SHARE
        # and it is paid what it computed per second, never more than the honest device doing the
        # same work (noise of a shared CPU: 40 %)
        honest_figures += [honest_far.tflops_fp32, long.tflops_fp32]
        cheat_figures.append(cheat.tflops_fp32)
        print(f"TFLOPS fp32: the honest device {honest_figures}, the cheater {cheat_figures}")
        if cheat.tflops_fp32 < 1.4 * max(honest_figures):
            return
    pytest.fail(f"TFLOPS fp32: the honest device {honest_figures}, the cheater {cheat_figures}")


@pytest.mark.slow
async def test_best_of_two_runs_gives_a_cheater_two_ways_to_fail_not_two_chances(
    start_miner, validator_client
) -> None:
    """Each precision is the best of two runs: the fastest VERIFIED run counts, and every run is. The
    cheat: run honestly once, then shortcut the second run to post a fast time."""
    honest = start_miner("honest")
    cheat = start_miner("second", cheat="partialsecond")
    params = small_params()
    base = await check_miner(MinerCheck(validator_client, target(honest), params, TABLE, SCORING))
    result = await check_miner(MinerCheck(validator_client, target(cheat, 2), params, TABLE, SCORING))
    assert base.ok and base.sample > 0, base.reasons
    assert not result.ok and result.sample == 0.0
    assert "fp16 proof rejected" in result.reasons[0], result.reasons
