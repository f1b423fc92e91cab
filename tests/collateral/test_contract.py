"""Every rule of the Collateral contract, played with real transactions on the in-process EVM.

Each bad input is a transaction the contract must refuse; each test fails if it were accepted.
"""

from __future__ import annotations

import pytest
from conftest import DELAY, TAO, TTL, World, make_world

from compute.collateral.chain import (
    KIND_CHEAT,
    KIND_FAILED_RENTAL,
    ZERO_ADDRESS,
    CollateralConfig,
    SlashProposal,
)
from compute.collateral.deploy import deploy
from compute.collateral.errors import ContractReverted
from compute.collateral.identity import machine_id


def reverted(error: str):
    return pytest.raises(ContractReverted, match=rf"contract reverted: {error}\b")


def rental_slash(world: World, evidence: bytes = b"\x01" * 32, gpus: int = 2) -> SlashProposal:
    return SlashProposal(
        world.miner.hotkey, world.machine, KIND_FAILED_RENTAL, evidence, gpus, world.renter.address
    )


def quorum(world: World, proposal: SlashProposal, voters: tuple[int, ...] = (0, 1)) -> None:
    results = [world.validators[i].client.attest(proposal) for i in voters]
    assert results[-1].event("Slashed") is not None
    assert all(r.event("Slashed") is None for r in results[:-1])


# ------------------------------------------------------------------ deposits


@pytest.mark.slow
def test_deposit_and_topup_are_recorded_with_events(world: World) -> None:
    first = world.miner.client.deposit(world.machine, 3 * TAO)
    event = first.event("Deposited")
    assert event is not None and event.args["amount"] == 3 * TAO and event.args["total"] == 3 * TAO
    assert event.args["owner"].lower() == world.miner.address
    world.miner.client.deposit(world.machine, 2 * TAO)
    state = world.miner.client.deposit_of(world.miner.hotkey, world.machine)
    assert (state.owner, state.amount, state.pending_reclaim, state.slashes) == (
        world.miner.address,
        5 * TAO,
        0,
        0,
    )
    assert world.balance(world.stack.collateral) == 5 * TAO


def test_required_amount_is_one_day_of_rent_per_proven_gpu(world: World) -> None:
    assert [world.miner.client.required(g) for g in (1, 2, 8)] == [TAO, 2 * TAO, 8 * TAO]


def test_wrong_amounts_are_refused(world: World) -> None:
    client = world.miner.client
    with reverted("BadAmount"):
        client.deposit(world.machine, 0)
    with reverted("BadAmount"):
        client.deposit(world.machine, TAO + 1)  # not a whole rao: subtensor would truncate it
    with reverted("BelowMinimum"):
        client.deposit(world.machine, TAO // 100)
    with reverted("BadMachine"):
        client.deposit(b"\x00" * 32, TAO)
    client.deposit(world.machine, TAO)
    with reverted("BadAmount"):
        client.request_reclaim(world.miner.hotkey, world.machine, 2 * TAO)  # more than held
    with reverted("BadAmount"):
        client.request_reclaim(world.miner.hotkey, world.machine, 0)
    assert client.deposit_of(world.miner.hotkey, world.machine).amount == TAO


def test_plain_transfers_to_the_contract_are_refused(world: World) -> None:
    from compute.collateral.deploy import send

    with pytest.raises(Exception, match="DirectPayment|revert|transaction failed"):
        send(
            world.chain.w3, world.miner.account, {"to": world.stack.collateral, "value": TAO, "gas": 100_000}
        )
    assert world.balance(world.stack.collateral) == 0


def test_an_address_not_associated_with_a_hotkey_cannot_deposit(world: World) -> None:
    stranger = world.chain.new_account()
    with reverted("NotAssociated"):
        world.stack.client(world.chain.w3, stranger).deposit(world.machine, TAO)


@pytest.mark.slow
def test_only_the_owner_tops_up_reclaims_or_finalizes(world: World) -> None:
    world.miner.client.deposit(world.machine, 2 * TAO)
    second_key = world.party("miner-second-key", uid=0)  # another EVM key of the same hotkey
    intruder = world.party("intruder")
    with reverted("NotOwner"):
        second_key.client.deposit(world.machine, TAO)
    for party in (second_key, intruder, world.validators[0]):
        with reverted("NotOwner"):
            party.client.request_reclaim(world.miner.hotkey, world.machine, TAO)
        with reverted("NotOwner"):
            party.client.finalize_reclaim(world.miner.hotkey, world.machine)
    assert world.miner.client.deposit_of(world.miner.hotkey, world.machine).amount == 2 * TAO


# ------------------------------------------------------------------ the quorum


@pytest.mark.slow
def test_one_validator_below_kappa_cannot_slash_but_the_quorum_does(world: World) -> None:
    proposal = rental_slash(world)
    world.miner.client.deposit(world.machine, 5 * TAO)
    largest = world.validators[2]  # 40 of 100: below one half
    assert largest.client.attest(proposal).event("Slashed") is None
    assert world.miner.client.deposit_of(world.miner.hotkey, world.machine).amount == 5 * TAO
    assert world.validators[0].client.attest(proposal).event("Slashed") is not None  # 70 of 100
    assert world.miner.client.deposit_of(world.miner.hotkey, world.machine).amount == 3 * TAO


@pytest.mark.slow
def test_kappa_is_configurable() -> None:
    world = make_world(
        CollateralConfig(
            rate_per_gpu_day=TAO, min_deposit=TAO, reclaim_delay_s=DELAY, proposal_ttl_s=TTL, kappa_bps=7500
        )
    )
    world.miner.client.deposit(world.machine, 5 * TAO)
    proposal = rental_slash(world)
    assert world.validators[2].client.attest(proposal).event("Slashed") is None  # 40
    assert world.validators[0].client.attest(proposal).event("Slashed") is None  # 70 < 75
    assert world.validators[1].client.attest(proposal).event("Slashed") is not None  # 100


@pytest.mark.slow
def test_a_validator_attesting_twice_is_refused_under_any_of_its_evm_keys(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    proposal = rental_slash(world)
    world.validators[0].client.attest(proposal)
    with reverted("AlreadyAttested"):
        world.validators[0].client.attest(proposal)
    same_hotkey = world.party("validator-0", uid=1)  # a second EVM key associated with validator 0
    with reverted("AlreadyAttested"):
        same_hotkey.client.attest(proposal)
    assert world.validators[0].client.tally(proposal) == (30, 100)
    assert world.validators[0].client.proposal(proposal).attesters == 1


@pytest.mark.slow
def test_stake_moved_after_attesting_is_not_counted_twice(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    proposal = rental_slash(world)
    a, b = world.validators[0], world.validators[1]
    a.client.attest(proposal)  # 30
    world.set_stake(1, a, 0)  # a moves its 30 to b: b now 60, total still 100
    world.set_stake(2, b, 60)
    result = b.client.attest(proposal)  # at attestation: 30 + 60 = 90; now: 0 + 60 = 60
    assert result.event("Slashed") is not None
    assert b.client.tally(proposal) == (60, 100)
    world2 = make_world(stakes=(30, 10, 60))
    world2.miner.client.deposit(world2.machine, 5 * TAO)
    proposal2 = rental_slash(world2)
    a2, b2 = world2.validators[0], world2.validators[1]
    a2.client.attest(proposal2)  # 30
    world2.set_stake(1, a2, 0)
    world2.set_stake(2, b2, 40)  # 30 moved from a2 to b2
    assert b2.client.attest(proposal2).event("Slashed") is None  # 0 + 40 < 50, though 30 + 40 was read
    assert world2.miner.client.deposit_of(world2.miner.hotkey, world2.machine).amount == 5 * TAO


def test_miners_and_strangers_cannot_attest(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    proposal = rental_slash(world)
    with reverted("NotValidator"):
        world.miner.client.attest(proposal)  # stake but no validator permit
    with reverted("NotValidator"):
        world.renter.client.attest(proposal)  # no association at all


@pytest.mark.slow
def test_a_dissociated_validator_no_longer_counts(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    proposal = rental_slash(world)
    world.validators[2].client.attest(proposal)  # 40
    assert world.stack.mirror is not None
    world.stack.mirror.dissociate(world.validators[2].account.address)
    assert world.validators[0].client.attest(proposal).event("Slashed") is None  # 30 counted, not 70
    assert world.validators[0].client.tally(proposal) == (30, 100)


def test_bad_proposals_are_refused(world: World) -> None:
    client = world.validators[0].client
    with reverted("NothingToSlash"):
        client.attest(rental_slash(world))
    world.miner.client.deposit(world.machine, 5 * TAO)
    base = rental_slash(world)
    for proposal, error in (
        (base.__class__(**{**base.__dict__, "gpus": 0}), "BadGpus"),
        (base.__class__(**{**base.__dict__, "gpus": 65}), "BadGpus"),
        (base.__class__(**{**base.__dict__, "kind": 2}), "BadKind"),
        (base.__class__(**{**base.__dict__, "evidence_hash": b"\x00" * 32}), "BadEvidence"),
        (base.__class__(**{**base.__dict__, "renter": ZERO_ADDRESS}), "BadRenter"),
        (base.__class__(**{**base.__dict__, "kind": KIND_CHEAT}), "BadRenter"),
    ):
        with reverted(error):
            client.attest(proposal)


@pytest.mark.slow
def test_one_evidence_slashes_once(world: World) -> None:
    world.miner.client.deposit(world.machine, 9 * TAO)
    proposal = rental_slash(world)
    quorum(world, proposal)
    with reverted("ProposalClosed"):
        world.validators[2].client.attest(proposal)
    again = SlashProposal(
        world.miner.hotkey, world.machine, KIND_FAILED_RENTAL, proposal.evidence_hash, 1, world.renter.address
    )
    with reverted("EvidenceUsed"):
        world.validators[0].client.attest(again)
    assert world.miner.client.deposit_of(world.miner.hotkey, world.machine).slashes == 1


# ------------------------------------------------------------------ amounts and payees


@pytest.mark.slow
def test_partial_first_then_escalating_and_never_above_the_deposit(world: World) -> None:
    world.miner.client.deposit(world.machine, 10 * TAO)
    taken = []
    for round_ in range(3):
        before = world.miner.client.deposit_of(world.miner.hotkey, world.machine).amount
        quorum(world, rental_slash(world, bytes([round_ + 1]) * 32, gpus=2))
        taken.append(before - world.miner.client.deposit_of(world.miner.hotkey, world.machine).amount)
    assert taken == [2 * TAO, 4 * TAO, 4 * TAO]  # one day, two days, then capped at what was left (8 > 4)
    assert world.miner.client.deposit_of(world.miner.hotkey, world.machine).amount == 0
    assert world.renter.client.owed(world.renter.address) == 10 * TAO
    with reverted("NothingToSlash"):
        world.validators[0].client.attest(rental_slash(world, b"\x09" * 32))


@pytest.mark.slow
def test_the_slash_is_owed_to_the_renter_and_nobody_else_can_claim_it(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    quorum(world, rental_slash(world))
    assert world.renter.client.owed(world.renter.address) == 2 * TAO
    for other in (world.miner, world.validators[0], world.party("someone-else")):
        with reverted("NothingOwed"):
            other.client.claim()
    before = world.balance(world.renter.address)
    receipt = world.renter.client.claim()
    assert world.balance(world.renter.address) == before + 2 * TAO - receipt.fee_wei
    assert world.renter.client.owed(world.renter.address) == 0
    with reverted("NothingOwed"):
        world.renter.client.claim()
    assert world.balance(world.stack.collateral) == 3 * TAO


@pytest.mark.slow
def test_a_cheat_slash_is_burned_and_a_remainder_goes_where_configured() -> None:
    world = make_world()
    world.miner.client.deposit(world.machine, 5 * TAO)
    cheat = SlashProposal(world.miner.hotkey, world.machine, KIND_CHEAT, b"\x07" * 32, 1)
    quorum(world, cheat)
    assert world.miner.client.burned() == TAO and world.balance(world.stack.collateral) == 5 * TAO
    treasury = world.chain.new_account()
    split = make_world(
        CollateralConfig(
            rate_per_gpu_day=TAO,
            min_deposit=TAO,
            reclaim_delay_s=DELAY,
            proposal_ttl_s=TTL,
            renter_share_bps=5000,
            remainder_to=treasury.address.lower(),
        )
    )
    split.miner.client.deposit(split.machine, 5 * TAO)
    quorum(split, rental_slash(split))
    assert split.renter.client.owed(split.renter.address) == TAO
    assert split.renter.client.owed(treasury.address) == TAO
    assert split.miner.client.burned() == 0


# ------------------------------------------------------------------ reclaims


def test_reclaim_waits_for_the_delay(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    asked = world.miner.client.request_reclaim(world.miner.hotkey, world.machine, 2 * TAO)
    assert asked.event("ReclaimRequested") is not None
    with reverted("ReclaimPending"):
        world.miner.client.request_reclaim(world.miner.hotkey, world.machine, TAO)
    with reverted("ReclaimTooEarly"):
        world.miner.client.finalize_reclaim(world.miner.hotkey, world.machine)
    world.chain.advance(DELAY + 1)
    before = world.balance(world.miner.address)
    done = world.miner.client.finalize_reclaim(world.miner.hotkey, world.machine)
    assert done.event("Reclaimed").args["amount"] == 2 * TAO  # type: ignore[union-attr]
    assert world.balance(world.miner.address) == before + 2 * TAO - done.fee_wei
    state = world.miner.client.deposit_of(world.miner.hotkey, world.machine)
    assert (state.amount, state.pending_reclaim, state.reclaim_at) == (3 * TAO, 0, 0)
    with reverted("NoReclaim"):
        world.miner.client.finalize_reclaim(world.miner.hotkey, world.machine)


@pytest.mark.slow
def test_a_reclaim_racing_a_slash_loses(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    world.miner.client.request_reclaim(world.miner.hotkey, world.machine, 5 * TAO)  # the miner runs
    proposal = rental_slash(world)
    world.validators[0].client.attest(proposal)  # a slash opens before the delay ends
    world.chain.advance(DELAY + 1)
    with reverted("SlashPending"):
        world.miner.client.finalize_reclaim(world.miner.hotkey, world.machine)
    assert world.validators[1].client.attest(proposal).event("Slashed") is not None
    state = world.miner.client.deposit_of(world.miner.hotkey, world.machine)
    assert (state.amount, state.pending_reclaim) == (3 * TAO, 3 * TAO)  # the slash came first
    world.miner.client.finalize_reclaim(world.miner.hotkey, world.machine)
    assert world.renter.client.owed(world.renter.address) == 2 * TAO
    assert world.balance(world.stack.collateral) == 2 * TAO  # exactly the renter's compensation


@pytest.mark.slow
def test_an_expired_proposal_stops_blocking_the_reclaim(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    proposal = rental_slash(world)
    world.validators[0].client.attest(proposal)
    world.miner.client.request_reclaim(world.miner.hotkey, world.machine, 5 * TAO)
    with reverted("ProposalNotExpired"):
        world.renter.client.expire(proposal)
    world.chain.advance(max(DELAY, TTL) + 1)
    with reverted("ProposalClosed"):
        world.validators[1].client.attest(proposal)  # too late to complete it
    with reverted("SlashPending"):
        world.miner.client.finalize_reclaim(world.miner.hotkey, world.machine)
    assert world.renter.client.expire(proposal).event("ProposalExpired") is not None
    assert (
        world.miner.client.finalize_reclaim(world.miner.hotkey, world.machine).event("Reclaimed") is not None
    )
    assert world.balance(world.stack.collateral) == 0


def test_a_cancelled_reclaim_leaves_the_deposit_whole(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    world.miner.client.request_reclaim(world.miner.hotkey, world.machine, 5 * TAO)
    assert world.miner.client.cancel_reclaim(world.miner.hotkey, world.machine).event("ReclaimCancelled")
    world.chain.advance(DELAY + 1)
    with reverted("NoReclaim"):
        world.miner.client.finalize_reclaim(world.miner.hotkey, world.machine)
    assert world.miner.client.deposit_of(world.miner.hotkey, world.machine).standing == 5 * TAO


# ------------------------------------------------------------------ reentrancy and hostile payees


def _attacker(world: World, uid: int) -> tuple[object, str]:
    address, _ = deploy(world.chain.w3, world.chain.accounts[0], "Attacker", world.stack.collateral)
    from compute.collateral.artifact import compiled

    contract = world.chain.w3.eth.contract(address=address, abi=compiled("Attacker").abi)
    assert world.stack.mirror is not None
    world.stack.mirror.associate(address, uid)
    return contract, address


def _call(world: World, contract, fn: str, *args, value: int = 0) -> None:
    from compute.collateral.deploy import send

    tx = getattr(contract.functions, fn)(*args).build_transaction(
        {"from": world.chain.accounts[0].address, "gas": 1, "nonce": 0}
    )
    send(
        world.chain.w3,
        world.chain.accounts[0],
        {"to": tx["to"], "data": tx["data"], "value": value, "gas": 900_000},
    )


def test_reentrant_reclaim_is_refused(world: World) -> None:
    from compute.collateral.identity import hotkey_bytes32

    attacker, address = _attacker(world, uid=0)  # a contract speaking for the miner hotkey
    machine = machine_id(["GPU-attack"])
    _call(world, attacker, "deposit", machine, value=4 * TAO)
    world.miner.client.deposit(world.machine, 3 * TAO)  # someone else's money in the contract
    _call(world, attacker, "setMode", 1)
    _call(world, attacker, "reclaim", hotkey_bytes32(world.miner.hotkey), machine, 4 * TAO)
    world.chain.advance(DELAY + 1)
    _call(world, attacker, "finalize", hotkey_bytes32(world.miner.hotkey), machine)
    assert attacker.functions.reentries().call() == 0
    assert attacker.functions.blocked().call() == 1  # it tried, and the guard refused
    assert world.balance(address) == 4 * TAO
    assert world.balance(world.stack.collateral) == 3 * TAO


@pytest.mark.slow
def test_reentrant_claim_is_refused_and_a_refusing_renter_cannot_block_a_slash(world: World) -> None:
    attacker, address = _attacker(world, uid=99)
    world.miner.client.deposit(world.machine, 5 * TAO)
    _call(world, attacker, "setMode", 3)  # refuses every payment
    proposal = SlashProposal(
        world.miner.hotkey, world.machine, KIND_FAILED_RENTAL, b"\x05" * 32, 1, address.lower()
    )
    quorum(world, proposal)  # the slash executes anyway: compensation is owed, never pushed
    assert world.renter.client.owed(address) == TAO
    with pytest.raises(Exception, match="transaction failed|revert"):
        _call(world, attacker, "claim")  # TransferFailed: it refused, it keeps its claim
    assert world.renter.client.owed(address) == TAO
    _call(world, attacker, "setMode", 2)  # now re-enters claim() when paid
    _call(world, attacker, "claim")
    assert attacker.functions.reentries().call() == 0
    assert attacker.functions.blocked().call() == 1
    assert world.balance(address) == TAO
    assert world.balance(world.stack.collateral) == 4 * TAO


# ------------------------------------------------------------------ the contract's surface


def test_no_function_lets_anyone_else_move_funds() -> None:
    from compute.collateral.artifact import compiled

    abi = compiled("Collateral").abi
    writes = sorted(
        item["name"]
        for item in abi
        if item["type"] == "function" and item["stateMutability"] not in ("view", "pure")
    )
    # Every write is listed and each one's payee is fixed by the tests above: finalizeReclaim pays
    # the deposit's owner, claim pays msg.sender what it is owed; the rest move no funds out.
    assert writes == [
        "attest",
        "cancelReclaim",
        "claim",
        "deposit",
        "execute",
        "expire",
        "finalizeReclaim",
        "requestReclaim",
    ]
    assert [i["name"] for i in abi if i["type"] == "function" and i["stateMutability"] == "payable"] == [
        "deposit"
    ]
    assert not any(
        i["type"] == "function" and "owner" in i["name"].lower() and i["stateMutability"] != "view"
        for i in abi
    )


@pytest.mark.slow
def test_execute_completes_a_quorum_reached_after_stake_grew(world: World) -> None:
    world.miner.client.deposit(world.machine, 5 * TAO)
    proposal = rental_slash(world)
    world.validators[2].client.attest(proposal)  # 40 of 100
    with reverted("NoQuorum"):
        world.renter.client.execute(proposal)
    world.set_stake(3, world.validators[2], 80)  # its stake grows: 80 of 140
    assert world.renter.client.execute(proposal).event("Slashed") is not None


@pytest.mark.parametrize(
    "field, value",
    [
        ("rate_per_gpu_day", 0),
        ("rate_per_gpu_day", TAO + 1),
        ("min_deposit", 0),
        ("reclaim_delay_s", 0),
        ("proposal_ttl_s", 0),
        ("kappa_bps", 0),
        ("kappa_bps", 10_001),
        ("renter_share_bps", 10_001),
    ],
)
def test_a_bad_configuration_cannot_be_deployed(field: str, value: int) -> None:
    from compute.collateral.devchain import local_chain

    chain = local_chain()
    good = dict(
        rate_per_gpu_day=TAO,
        min_deposit=TAO,
        reclaim_delay_s=DELAY,
        proposal_ttl_s=TTL,
        kappa_bps=5000,
        renter_share_bps=10_000,
    )
    args = {**good, field: value}
    with pytest.raises(Exception, match="BadConfig|revert"):
        deploy(
            chain.w3,
            chain.accounts[0],
            "Collateral",
            chain.accounts[1].address,
            args["rate_per_gpu_day"],
            args["min_deposit"],
            args["reclaim_delay_s"],
            args["proposal_ttl_s"],
            args["kappa_bps"],
            args["renter_share_bps"],
            ZERO_ADDRESS,
        )
