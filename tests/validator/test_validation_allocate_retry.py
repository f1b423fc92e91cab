"""A lost allocate answer is asked again with the test's one idempotency key: one lease, never two.

The miner (real app, embedded backend, real HTTP and SSH on 127.0.0.1) takes longer to start the
first lease than the validator's client waits. The validator asks the same miner again with the
same key: the miner answers "starting", then the lease it already made, and the test goes on in it.
Without the key, a retry found the GPUs held by the validator's own orphan (read as "rented") or
made a second lease; the control below plays that old validator.
"""

from __future__ import annotations

import asyncio

import pytest
from validator_helpers import small_params, validator_client_of

from compute.scoring import ScoringConfig, load_gpu_table
from compute.validator import MinerCheck, MinerTarget, check_miner
from compute.validator.check import lease as lease_steps


@pytest.fixture
async def impatient_client(make_wallet):
    async with validator_client_of(make_wallet("validator"), 1.0) as client:
        yield client


async def _check(client, miner):
    target = MinerTarget(1, miner.hotkey, miner.endpoint)
    return await check_miner(MinerCheck(client, target, small_params(), load_gpu_table(), ScoringConfig()))


@pytest.mark.slow
async def test_a_timed_out_allocation_is_replayed_and_the_test_passes(
    start_miner, impatient_client, slow_first_start
) -> None:
    miner = start_miner("slowstart")
    me = impatient_client.wallet_obj.hotkey.ss58_address
    result = await _check(impatient_client, miner)
    assert result.ok, result.reasons
    assert len(slow_first_start) == 1  # the retries were answered from the first attempt's lease
    assert len(miner.manager.store.by_owner(me)) == 1  # one lease ever made, and it was released
    assert await miner.backend.running() == set()


@pytest.mark.slow
async def test_control_one_try_fails_and_leaves_an_orphan(
    start_miner, impatient_client, slow_first_start, monkeypatch
) -> None:
    """The old validator (one try): the test fails and the miner is left running a lease nobody uses."""
    monkeypatch.setattr(lease_steps, "ALLOCATE_TRIES", 1)
    miner = start_miner("slowstart1")
    result = await _check(impatient_client, miner)
    assert not result.ok and "allocate" in "; ".join(result.reasons)
    for _ in range(50):  # the first start finishes after the validator gave up
        if await miner.backend.running():
            break
        await asyncio.sleep(0.1)
    assert len(await miner.backend.running()) == 1
