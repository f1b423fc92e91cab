"""Rental truth against real miners: rented credit only for leases the validator verifies.

Each cheater is a real miner on 127.0.0.1 (signed app, embedded backend, real SSH) that plays one
way of claiming "rented" without a real, known renter holding a live lease.
"""

from __future__ import annotations

import time

import pytest
from validator_helpers import FAKE_GPU, emulated_params, small_params

from compute.protocol import (
    AllocateRequest,
    ErrorCode,
    RentalReceiptsRequest,
    RequestFailed,
    Requirements,
)
from compute.scoring import ScoringConfig, load_gpu_table
from compute.store import PogResult
from compute.transport import KeyWallet, MinerClient
from compute.validator import MinerCheck, MinerTarget, check_miner
from compute.validator.rentals.receipts import ReceiptRejected, Renters, verify_receipt
from compute.validator.rentals.truth import MinerNotes

TABLE = load_gpu_table()
SCORING = ScoringConfig()
RENTER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
FULL = TABLE.weight_of("H100 SXM") * (1 + SCORING.rented_bonus)  # no bonus by default: 3.3


def target(miner, uid: int = 1) -> MinerTarget:
    return MinerTarget(uid, miner.hotkey, miner.endpoint)


def verified_before(miner) -> PogResult:
    return PogResult(3, 1, miner.hotkey, ok=True, sample=3.3, models=("H100 SXM",), gpu_count=1)


async def rent(wallet, miner, gpu_count: int = 1):
    """Allocate through the normal renter path: a signed request over HTTP."""
    request = AllocateRequest(
        requirements=Requirements(gpu_count=gpu_count), duration_s=3600, ssh_public_key=RENTER_KEY
    )
    async with MinerClient(KeyWallet.from_wallet(wallet)) as renter:
        return (await renter.call(miner.endpoint, miner.hotkey, request)).lease


async def receipts(client, miner):
    return (await client.call(miner.endpoint, miner.hotkey, RentalReceiptsRequest())).receipts


@pytest.mark.slow
async def test_honest_rented_miner_keeps_its_credit(start_miner, validator_client, make_wallet) -> None:
    miner = start_miner("rented", gpus=(FAKE_GPU,))
    renter = make_wallet("renter")
    await rent(renter, miner)
    params = emulated_params(round_id=5, trusted_renters=frozenset({renter.hotkey.ss58_address}))
    notes = MinerNotes()
    result = await check_miner(
        MinerCheck(
            validator_client, target(miner), params, TABLE, SCORING, verified_before(miner), notes=notes
        )
    )
    assert result.ok and result.rented, result.reasons
    assert result.rented_fraction == 1.0
    assert result.sample == pytest.approx(FULL)
    assert notes.rentals is not None and len(notes.rentals.alive) == 1
    assert len(await miner.backend.running()) == 1  # only the renter's lease is left


@pytest.mark.slow
async def test_a_rented_gpu_not_shown_beside_its_tenant_earns_nothing(
    start_miner, validator_client, make_wallet
) -> None:
    """A real, signed, live rental whose GPU the miner will not (or cannot: it is elsewhere) show
    beside its tenant: a receipt proves a contract, not a GPU, so the rented GPU earns nothing."""
    miner = start_miner("elsewhere", gpus=(FAKE_GPU,))
    renter = make_wallet("renter")
    await rent(renter, miner)
    allocate = miner.manager.allocate

    async def no_beside(owner, request, receipt=None):
        if request.purpose == "beside":
            raise RequestFailed(ErrorCode.NO_CAPACITY, "the GPU is elsewhere", 409)
        return await allocate(owner, request, receipt)

    miner.manager.allocate = no_beside
    params = emulated_params(round_id=5, trusted_renters=frozenset({renter.hotkey.ss58_address}))
    notes = MinerNotes()
    result = await check_miner(
        MinerCheck(
            validator_client, target(miner), params, TABLE, SCORING, verified_before(miner), notes=notes
        )
    )
    assert not result.ok and result.sample == 0.0, result.reasons
    assert "no lease beside the tenants" in result.reasons[0]
    assert notes.rentals is not None and len(notes.rentals.alive) == 1  # the receipt itself verified


async def test_miner_refusing_every_lease_gets_nothing(start_miner, validator_client, make_wallet) -> None:
    miner = start_miner("refuser", gpus=(FAKE_GPU,))

    async def refuse(owner, request, receipt=None):
        raise RequestFailed(ErrorCode.NO_CAPACITY, "all GPUs are rented", 409)

    miner.manager.allocate = refuse  # the cheat: claim "rented" to every caller
    params = small_params(round_id=5, trusted_renters=frozenset({make_wallet("renter").hotkey.ss58_address}))
    result = await check_miner(
        MinerCheck(validator_client, target(miner), params, TABLE, SCORING, verified_before(miner))
    )
    assert not result.ok and result.sample == 0.0
    assert "no verified lease" in result.reasons[0]


async def test_rental_to_an_unknown_renter_earns_nothing(start_miner, validator_client, make_wallet) -> None:
    miner = start_miner("sybil", gpus=(FAKE_GPU,))
    await rent(make_wallet("sybil-renter"), miner)  # the miner's own second key "rents" its GPU
    params = small_params(round_id=5, trusted_renters=frozenset({make_wallet("renter").hotkey.ss58_address}))
    result = await check_miner(
        MinerCheck(validator_client, target(miner), params, TABLE, SCORING, verified_before(miner))
    )
    assert not result.ok and result.sample == 0.0
    assert "not a known party" in result.reasons[0]


async def test_lease_whose_endpoint_died_earns_nothing(start_miner, validator_client, make_wallet) -> None:
    miner = start_miner("dead", gpus=(FAKE_GPU,))
    renter = make_wallet("renter")
    lease = await rent(renter, miner)
    await miner.backend.stop(lease.lease_id)  # the GPU stays "held", nobody can reach the lease
    params = emulated_params(round_id=5, trusted_renters=frozenset({renter.hotkey.ss58_address}))
    notes = MinerNotes()
    result = await check_miner(
        MinerCheck(
            validator_client, target(miner), params, TABLE, SCORING, verified_before(miner), notes=notes
        )
    )
    assert not result.ok and result.sample == 0.0
    assert notes.rentals is not None and len(notes.rentals.dead) == 1


async def test_tampered_or_misdirected_receipts_are_rejected(
    start_miner, validator_client, make_wallet
) -> None:
    miner, other = start_miner("a", gpus=(FAKE_GPU,)), start_miner("b", gpus=(FAKE_GPU,))
    renter = make_wallet("renter")
    trusted = Renters(frozenset({renter.hotkey.ss58_address}))
    await rent(renter, miner)
    (receipt,) = await receipts(validator_client, miner)
    now = receipt.created_at + 1
    assert verify_receipt(receipt, miner.hotkey, trusted, now).gpu_count == 1
    with pytest.raises(ReceiptRejected, match="signature"):  # shown by another miner
        verify_receipt(receipt, other.hotkey, trusted, now)
    more_gpus = receipt.request.body.replace('"gpu_count":1', '"gpu_count":8')
    assert more_gpus != receipt.request.body
    tampered = receipt.model_copy(update={"request": receipt.request.model_copy(update={"body": more_gpus})})
    with pytest.raises(ReceiptRejected, match="signature"):
        verify_receipt(tampered, miner.hotkey, trusted, now)
    with pytest.raises(ReceiptRejected, match="signed term"):
        verify_receipt(receipt, miner.hotkey, trusted, now + 3 * 3600)


@pytest.mark.slow
async def test_validation_leases_leave_no_receipt(start_miner, validator_client) -> None:
    miner = start_miner("honest")
    result = await check_miner(MinerCheck(validator_client, target(miner), small_params(), TABLE, SCORING))
    assert result.ok, result.reasons
    assert await receipts(validator_client, miner) == []


@pytest.mark.slow
async def test_a_kept_canary_lease_is_no_receipt(tmp_path, start_miner, validator_client) -> None:
    """The cheat: ignore the release of the validator's canary (a real rental's term, signed by a
    permitted hotkey), keep it alive, then refuse the validation lease that follows as "rented"."""
    import random

    from compute.validator.rentals.canary import CanaryRenter, CanaryTiming, run_canary

    miner = start_miner("keeper", gpus=(FAKE_GPU,))

    async def keep(caller: str, lease_id: str) -> None:  # answers the release, keeps the lease
        return None

    miner.manager.deallocate = keep
    renter = CanaryRenter(validator_client.hotkey, validator_client, tmp_path / "canary")
    outcome = await run_canary(renter, target(miner), random.Random(4), CanaryTiming.for_dwell(0.3))
    assert not outcome.ok and "still answers after its release" in outcome.reason  # the canary fails
    assert len(await miner.backend.running()) == 1  # the kept canary holds the GPU
    validator = validator_client.hotkey
    own = renter.own_keys(time.time())
    params = small_params(round_id=5, trusted_renters=frozenset({validator}), own_canaries=own)
    result = await check_miner(
        MinerCheck(validator_client, target(miner), params, TABLE, SCORING, verified_before(miner))
    )
    assert not result.ok and result.sample == 0.0
    assert "own canary" in result.reasons[0], result.reasons
