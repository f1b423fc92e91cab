"""A validator killed mid-round leaves its validation lease; the next test of that miner releases it."""

from __future__ import annotations

import pytest
from validator_helpers import small_params

from compute.protocol import AllocateRequest, Requirements
from compute.scoring import ScoringConfig, load_gpu_table
from compute.validator import MinerCheck, MinerTarget, check_miner

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def allocate(purpose: str) -> AllocateRequest:
    return AllocateRequest(
        requirements=Requirements(gpu_count=0), duration_s=600, ssh_public_key=KEY, purpose=purpose
    )


@pytest.mark.slow
async def test_next_round_releases_own_stale_validation_lease_only(
    start_miner, validator_client, make_wallet
) -> None:
    miner = start_miner("stale", cheat="silent")
    me = validator_client.wallet_obj.hotkey.ss58_address
    stale = await miner.manager.allocate(me, allocate("validation"))  # left by a killed run
    rental = await miner.manager.allocate(me, allocate("rental"))  # the validator also rents: kept
    someone = await miner.manager.allocate(make_wallet("other").hotkey.ss58_address, allocate("validation"))
    target = MinerTarget(1, miner.hotkey, miner.endpoint)
    await check_miner(
        MinerCheck(
            validator_client, target, small_params(miner_timeout=4.0), load_gpu_table(), ScoringConfig()
        )
    )
    assert (await miner.manager.status(me, stale.lease_id)).state == "released"
    assert await miner.backend.running() == {rental.lease_id, someone.lease_id}
