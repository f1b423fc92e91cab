"""One miner's round against real miners (signed app, embedded backend, real SSH, real worker)."""

from __future__ import annotations

import asyncio

import pytest
from validator_helpers import FAKE_GPU, small_params

from compute.protocol import AllocateRequest, Requirements
from compute.scoring import ScoringConfig, load_gpu_table
from compute.store import PogResult
from compute.validator import MinerCheck, MinerTarget, check_miner, rented_sample

TABLE = load_gpu_table()
SCORING = ScoringConfig()


def target(miner, uid: int = 1) -> MinerTarget:
    return MinerTarget(uid, miner.hotkey, miner.endpoint)


@pytest.mark.slow
async def test_honest_cpu_miner_is_verified_and_scores_positive(start_miner, validator_client) -> None:
    miner = start_miner("honest")
    result = await check_miner(MinerCheck(validator_client, target(miner), small_params(), TABLE, SCORING))
    assert result.ok, result.reasons
    assert result.sample > 0
    assert result.models == ("CPU",)
    assert result.tflops_fp16 > 0 and result.tflops_fp32 > 0
    assert set(result.timings) >= {"fp16_s", "fp32_s", "total_s"}
    assert await miner.backend.running() == set()  # the validation lease was released


CAUGHT_BY = {
    "partial": "fp16 proof rejected",
    "bf16": "fp16 proof rejected",
    "fp16acc": "fp16 proof rejected",
    "replay": "fp16 proof rejected",
    "forged": "fp16 proof rejected",
    "garbage": "not JSON",
    "deepnest": "malformed",
    "hugeint": "malformed",
    "wrongtype": "malformed",
}


@pytest.mark.parametrize("mode", sorted(CAUGHT_BY))
@pytest.mark.slow
async def test_cheating_worker_scores_zero(start_miner, validator_client, mode: str) -> None:
    miner = start_miner(f"cheat-{mode}", cheat=mode)
    result = await check_miner(MinerCheck(validator_client, target(miner), small_params(), TABLE, SCORING))
    assert not result.ok and result.sample == 0.0
    assert CAUGHT_BY[mode] in result.reasons[0], result.reasons
    assert await miner.backend.running() == set()


@pytest.mark.slow
async def test_a_spike_in_one_timed_run_does_not_lower_an_honest_figure(
    start_miner, validator_client
) -> None:
    """Each precision is timed as the best of two short runs: a 2 s stall in the first fp16 run is not
    what the miner is credited for."""
    miner = start_miner("spike", cheat="spike")
    result = await check_miner(MinerCheck(validator_client, target(miner), small_params(), TABLE, SCORING))
    assert result.ok, result.reasons
    assert result.timings["fp16_s"] < 1.5  # the stalled run took > 2 s


@pytest.mark.slow
async def test_silent_worker_times_out_and_lease_is_released(start_miner, validator_client) -> None:
    miner = start_miner("silent", cheat="silent")
    result = await check_miner(
        MinerCheck(validator_client, target(miner), small_params(miner_timeout=4.0), TABLE, SCORING)
    )
    assert not result.ok and result.sample == 0.0
    assert "exceeded" in result.reasons[0] or "silent" in result.reasons[0]
    await asyncio.sleep(0.5)
    assert await miner.backend.running() == set()


@pytest.mark.slow
async def test_unreachable_miner_fails_with_reason_after_retries(validator_client) -> None:
    dead = MinerTarget(3, "5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM", "127.0.0.1:9")
    result = await check_miner(MinerCheck(validator_client, dead, small_params(retries=1), TABLE, SCORING))
    assert not result.ok and result.sample == 0.0
    assert "specs" in result.reasons[0]


async def test_gpu_held_without_a_receipt_earns_no_rented_credit(
    start_miner, validator_client, make_wallet
) -> None:
    miner = start_miner("rented", gpus=(FAKE_GPU,))
    renter = make_wallet("renter").hotkey.ss58_address
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    await miner.manager.allocate(  # held, but by no signed request a validator could check
        renter, AllocateRequest(requirements=Requirements(gpu_count=1), duration_s=600, ssh_public_key=key)
    )
    previous = PogResult(3, 1, miner.hotkey, ok=True, sample=3.3, models=("H100 SXM",), gpu_count=1)
    params = small_params(round_id=5, trusted_renters=frozenset({renter}))
    result = await check_miner(MinerCheck(validator_client, target(miner), params, TABLE, SCORING, previous))
    assert not result.ok and result.sample == 0.0
    assert "no verified lease" in result.reasons[0]
    assert len(await miner.backend.running()) == 1  # only the renter's lease is left


def test_rented_sample_decays_once_the_verification_is_stale() -> None:
    previous = PogResult(10, 1, "hk", ok=True, sample=3.3, models=("H100 SXM",), gpu_count=1)
    params = small_params(rented_max_age=2, rented_decay=0.5)
    fresh = rented_sample(previous, 12, params, TABLE, SCORING)
    assert fresh > 0
    assert rented_sample(previous, 14, params, TABLE, SCORING) == pytest.approx(fresh * 0.25)
    assert rented_sample(PogResult(10, 1, "hk", ok=False, sample=0.0), 11, params, TABLE, SCORING) == 0.0
