"""Every rule of the Collateral contract, played with real transactions on the in-process EVM.

Each bad input is a transaction the contract must refuse; each test fails if it were accepted.
"""

from __future__ import annotations

import pytest
from evm_world import BOND, DELAY, TAO, TTL, WINDOWS, World, make_world

from compute.collateral.chain import (
    KIND_CHEAT,
    KIND_FAILED_RENTAL,
    ZERO_ADDRESS,
    CollateralConfig,
    SlashProposal,
)
from compute.collateral.deploy import deploy, deploy_stack
from compute.collateral.errors import CollateralError, ContractReverted
from compute.collateral.windows import Windows


def reverted(error: str):
    return pytest.raises(ContractReverted, match=rf"contract reverted: {error}\b")


def rental_slash(
    world: World, incident: bytes = b"\x01" * 32, gpus: int = 2, evidence: bytes = b"\xee" * 32
) -> SlashProposal:
    return SlashProposal(
        world.miner.hotkey, KIND_FAILED_RENTAL, incident, evidence, gpus, world.renter.address
    )


def quorum(world: World, proposal: SlashProposal, voters: tuple[int, ...] = (0, 1)) -> None:
    results = [world.validators[i].client.attest(proposal) for i in voters]
    assert results[-1].event("Slashed") is not None
    assert all(r.event("Slashed") is None for r in results[:-1])


def deposit(world: World) -> object:
    return world.miner.client.deposit_of(world.miner.hotkey)


# ------------------------------------------------------------------ deposits


@pytest.mark.slow
def test_deposit_and_topup_are_recorded_with_events(world: World) -> None:
    first = world.miner.client.deposit(3 * TAO)
    event = first.event("Deposited")
    assert event is not None and event.args["amount"] == 3 * TAO and event.args["total"] == 3 * TAO
    assert event.args["owner"].lower() == world.miner.address
    world.miner.client.deposit(2 * TAO)
    state = deposit(world)
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
        client.deposit(0)
    with reverted("BadAmount"):
        client.deposit(TAO + 1)  # not a whole rao: subtensor would truncate it
    with reverted("BelowMinimum"):
        client.deposit(TAO // 100)
    client.deposit(TAO)
    with reverted("BadAmount"):
        client.request_reclaim(world.miner.hotkey, 2 * TAO)  # more than held
    with reverted("BadAmount"):
        client.request_reclaim(world.miner.hotkey, 0)
    assert deposit(world).amount == TAO


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
        world.stack.client(world.chain.w3, stranger).deposit(TAO)


@pytest.mark.slow
def test_only_the_owner_tops_up_reclaims_or_finalizes(world: World) -> None:
    world.miner.client.deposit(2 * TAO)
    second_key = world.party("miner-second-key", uid=0)  # another EVM key of the same hotkey
    intruder = world.party("intruder")
    with reverted("NotOwner"):
        second_key.client.deposit(TAO)
    for party in (second_key, intruder, world.validators[0]):
        with reverted("NotOwner"):
            party.client.request_reclaim(world.miner.hotkey, TAO)
        with reverted("NotOwner"):
            party.client.finalize_reclaim(world.miner.hotkey)
    assert deposit(world).amount == 2 * TAO


@pytest.mark.slow
def test_one_hotkey_has_one_deposit_however_many_machines_it_claims(world: World) -> None:
    """A miner that showed each validator another GPU set cannot post one deposit per identity:
    every deposit of its hotkey is the same deposit, and a slash of it is a slash of all of it."""
    for _ in range(3):
        world.miner.client.deposit(TAO)  # "one deposit per machine id" of the old contract
    assert deposit(world).amount == 3 * TAO
    quorum(world, rental_slash(world, gpus=1))
    assert deposit(world).amount == 2 * TAO and deposit(world).slashes == 1


# ------------------------------------------------------------------ the quorum


@pytest.mark.slow
def test_one_validator_below_kappa_cannot_slash_but_the_quorum_does(world: World) -> None:
    proposal = rental_slash(world)
    world.miner.client.deposit(5 * TAO)
    largest = world.validators[2]  # 40 of 100: below one half
    assert largest.client.attest(proposal).event("Slashed") is None
    assert deposit(world).amount == 5 * TAO
    assert world.validators[0].client.attest(proposal).event("Slashed") is not None  # 70 of 100
    assert deposit(world).amount == 3 * TAO


@pytest.mark.slow
def test_kappa_is_configurable() -> None:
    world = make_world(
        CollateralConfig(
            rate_per_gpu_day=TAO, min_deposit=TAO, reclaim_delay_s=DELAY, proposal_ttl_s=TTL, kappa_bps=7500
        )
    )
    world.miner.client.deposit(5 * TAO)
    proposal = rental_slash(world)
    assert world.validators[2].client.attest(proposal).event("Slashed") is None  # 40
    assert world.validators[0].client.attest(proposal).event("Slashed") is None  # 70 < 75
    assert world.validators[1].client.attest(proposal).event("Slashed") is not None  # 100


@pytest.mark.slow
def test_a_validator_attesting_twice_is_refused_under_any_of_its_evm_keys(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    proposal = rental_slash(world)
    world.validators[0].client.attest(proposal)
    with reverted("AlreadyAttested"):
        world.validators[0].client.attest(proposal)
    same_hotkey = world.party("validator-0", uid=1)  # a second EVM key associated with validator 0
    with reverted("AlreadyAttested"):
        same_hotkey.client.attest(proposal)
    other_document = rental_slash(world, evidence=b"\x55" * 32)  # the same incident, another document
    with reverted("AlreadyAttested"):
        world.validators[0].client.attest(other_document)
    assert world.validators[0].client.tally(proposal) == (30, 100)
    assert world.validators[0].client.proposal(proposal).attesters == 1


@pytest.mark.slow
def test_stake_moved_after_attesting_is_not_counted_twice(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    proposal = rental_slash(world)
    a, b = world.validators[0], world.validators[1]
    a.client.attest(proposal)  # 30
    world.set_stake(1, a, 0)  # a moves its 30 to b: b now 60, total still 100
    world.set_stake(2, b, 60)
    result = b.client.attest(proposal)  # at attestation: 30 + 60 = 90; now: 0 + 60 = 60
    assert result.event("Slashed") is not None
    assert b.client.tally(proposal) == (60, 100)
    world2 = make_world(stakes=(30, 10, 60))
    world2.miner.client.deposit(5 * TAO)
    proposal2 = rental_slash(world2)
    a2, b2 = world2.validators[0], world2.validators[1]
    a2.client.attest(proposal2)  # 30
    world2.set_stake(1, a2, 0)
    world2.set_stake(2, b2, 40)  # 30 moved from a2 to b2
    assert b2.client.attest(proposal2).event("Slashed") is None  # 0 + 40 < 50, though 30 + 40 was read
    assert world2.miner.client.deposit_of(world2.miner.hotkey).amount == 5 * TAO


def test_miners_and_strangers_cannot_attest(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    proposal = rental_slash(world)
    with reverted("NotValidator"):
        world.miner.client.attest(proposal)  # stake but no validator permit
    with reverted("NotValidator"):
        world.renter.client.attest(proposal)  # no association at all


@pytest.mark.slow
def test_a_dissociated_validator_no_longer_counts(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
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
    world.miner.client.deposit(5 * TAO)
    base = rental_slash(world)
    for proposal, error in (
        (base.__class__(**{**base.__dict__, "gpus": 0}), "BadGpus"),
        (base.__class__(**{**base.__dict__, "gpus": 65}), "BadGpus"),
        (base.__class__(**{**base.__dict__, "kind": 2}), "BadKind"),
        (base.__class__(**{**base.__dict__, "incident": b"\x00" * 32}), "BadIncident"),
        (base.__class__(**{**base.__dict__, "renter": ZERO_ADDRESS}), "BadRenter"),
        (base.__class__(**{**base.__dict__, "kind": KIND_CHEAT}), "BadRenter"),
    ):
        with reverted(error):
            client.attest(proposal)


# ------------------------------------------------------------------ one incident, one slash


@pytest.mark.slow
def test_one_incident_slashes_once_whatever_documents_show_it(world: World) -> None:
    """The same genuine probes re-served in other orders or subsets are other documents of the same
    incident: they count toward one proposal, and once it executed nothing slashes it again (not
    another document, not another GPU count, not a re-opening)."""
    world.miner.client.deposit(9 * TAO)
    first, reordered, subset = (rental_slash(world, evidence=bytes([n]) * 32) for n in (0x11, 0x12, 0x13))
    assert world.validators[0].client.attest(first).event("Slashed") is None
    executed = world.validators[1].client.attest(reordered)  # another document of the same incident
    assert executed.event("Slashed") is not None  # ... counts toward the same proposal
    assert executed.event("Attested").args["evidenceHash"] == reordered.evidence_hash  # type: ignore[union-attr]
    with reverted("ProposalClosed"):
        world.validators[2].client.attest(subset)
    for gpus in (1, 8):  # the same incident sized otherwise is another proposal id: refused at opening
        with reverted("IncidentUsed"):
            world.validators[2].client.attest(rental_slash(world, gpus=gpus))
    world.chain.advance(TTL + 1)
    with reverted("ProposalClosed"):  # an executed proposal never re-opens
        world.validators[2].client.attest(first)
    assert world.miner.client.incident_used(world.miner.hotkey, first.incident)
    assert (deposit(world).amount, deposit(world).slashes) == (7 * TAO, 1)
    assert world.renter.client.owed(world.renter.address) == 2 * TAO


@pytest.mark.slow
def test_a_sized_variant_of_a_slashed_incident_stops_blocking_and_returns_its_bond(world: World) -> None:
    world.miner.client.deposit(9 * TAO)
    larger = rental_slash(world, gpus=4)
    opener = world.validators[2]
    opener.client.attest(larger)  # opened first (40), sized by a larger count
    quorum(world, rental_slash(world, gpus=2))  # the quorum agrees on 2 GPUs: executes
    with reverted("IncidentUsed"):
        world.validators[0].client.attest(larger)  # reaches 70 %, but the incident is slashed
    world.renter.client.expire(larger)  # anyone closes it at once: the opener was right
    assert world.renter.client.owed(opener.address) == BOND
    assert deposit(world).open_proposals == 0 and deposit(world).slashes == 1


@pytest.mark.slow
def test_a_slash_of_nothing_never_executes_nor_counts_toward_escalation(world: World) -> None:
    world.miner.client.deposit(2 * TAO)
    drains, late = rental_slash(world, b"\x01" * 32), rental_slash(world, b"\x02" * 32)
    world.validators[0].client.attest(late)  # opened while there is a deposit
    quorum(world, drains)  # takes all of it (2 GPUs x 1 day)
    with reverted("NothingToSlash"):
        world.validators[1].client.attest(late)  # the quorum, but nothing left: no execution
    assert (deposit(world).amount, deposit(world).slashes) == (0, 1)
    with reverted("NothingToSlash"):
        world.validators[2].client.attest(rental_slash(world, b"\x03" * 32))
    world.miner.client.deposit(TAO)  # back in business: the second incident is still slashable, once
    assert world.validators[1].client.attest(late).event("Slashed").args["slashes"] == 2  # type: ignore[union-attr]
    assert (deposit(world).amount, deposit(world).slashes) == (0, 2)
    assert world.renter.client.owed(world.renter.address) == 3 * TAO


# ------------------------------------------------------------------ amounts and payees


@pytest.mark.slow
def test_partial_first_then_escalating_and_never_above_the_deposit(world: World) -> None:
    world.miner.client.deposit(10 * TAO)
    taken = []
    for round_ in range(3):
        before = deposit(world).amount
        quorum(world, rental_slash(world, bytes([round_ + 1]) * 32, gpus=2))
        taken.append(before - deposit(world).amount)
    assert taken == [2 * TAO, 4 * TAO, 4 * TAO]  # one day, two days, then capped at what was left (8 > 4)
    assert deposit(world).amount == 0
    assert world.renter.client.owed(world.renter.address) == 10 * TAO
    with reverted("NothingToSlash"):
        world.validators[0].client.attest(rental_slash(world, b"\x09" * 32))


@pytest.mark.slow
def test_the_slash_is_owed_to_the_renter_and_nobody_else_can_claim_it(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    quorum(world, rental_slash(world))
    assert world.renter.client.owed(world.renter.address) == 2 * TAO
    for other in (world.miner, world.validators[1], world.party("someone-else")):
        with reverted("NothingOwed"):
            other.client.claim()
    before = world.balance(world.renter.address)
    receipt = world.renter.client.claim()
    assert world.balance(world.renter.address) == before + 2 * TAO - receipt.fee_wei
    assert world.renter.client.owed(world.renter.address) == 0
    with reverted("NothingOwed"):
        world.renter.client.claim()
    world.validators[0].client.claim()  # the opener's bond, back
    assert world.balance(world.stack.collateral) == 3 * TAO


@pytest.mark.slow
def test_a_cheat_slash_is_burned_and_a_remainder_goes_where_configured() -> None:
    world = make_world()
    world.miner.client.deposit(5 * TAO)
    cheat = SlashProposal(world.miner.hotkey, KIND_CHEAT, b"\x07" * 32, b"\x08" * 32, 1)
    quorum(world, cheat)
    assert world.miner.client.burned() == TAO
    assert world.balance(world.stack.collateral) == 5 * TAO + BOND  # the opener's bond is owed to it
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
    split.miner.client.deposit(5 * TAO)
    quorum(split, rental_slash(split))
    assert split.renter.client.owed(split.renter.address) == TAO
    assert split.renter.client.owed(treasury.address) == TAO
    assert split.miner.client.burned() == 0


# ------------------------------------------------------------------ opening costs a bond


@pytest.mark.slow
def test_opening_costs_a_bond_returned_when_the_slash_executes(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    proposal = rental_slash(world)
    opener, second = world.validators[0], world.validators[1]
    with reverted("BondRequired"):
        opener.client._send("attest", *proposal.args())  # no bond: no opening
    before = world.balance(opener.address)
    opened = opener.client.attest(proposal)
    assert opened.event("SlashProposed").args["opener"].lower() == opener.address  # type: ignore[union-attr]
    assert world.balance(opener.address) == before - BOND - opened.fee_wei
    with reverted("BadAmount"):
        second.client._send("attest", *proposal.args(), value=BOND)  # a bond on an open proposal
    second.client.attest(proposal)
    assert world.renter.client.owed(opener.address) == BOND  # right: its bond back
    assert world.renter.client.owed(world.miner.address) == 0


# ------------------------------------------------------------------ reclaims


def test_reclaim_waits_for_the_delay(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    asked = world.miner.client.request_reclaim(world.miner.hotkey, 2 * TAO)
    assert asked.event("ReclaimRequested") is not None
    with reverted("ReclaimPending"):
        world.miner.client.request_reclaim(world.miner.hotkey, TAO)
    with reverted("ReclaimTooEarly"):
        world.miner.client.finalize_reclaim(world.miner.hotkey)
    world.chain.advance(DELAY + 1)
    before = world.balance(world.miner.address)
    done = world.miner.client.finalize_reclaim(world.miner.hotkey)
    assert done.event("Reclaimed").args["amount"] == 2 * TAO  # type: ignore[union-attr]
    assert world.balance(world.miner.address) == before + 2 * TAO - done.fee_wei
    state = deposit(world)
    assert (state.amount, state.pending_reclaim, state.reclaim_at) == (3 * TAO, 0, 0)
    with reverted("NoReclaim"):
        world.miner.client.finalize_reclaim(world.miner.hotkey)


@pytest.mark.slow
def test_a_reclaim_racing_a_slash_loses(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    world.miner.client.request_reclaim(world.miner.hotkey, 5 * TAO)  # the miner runs
    proposal = rental_slash(world)
    world.validators[0].client.attest(proposal)  # a slash opens before the delay ends
    world.chain.advance(DELAY + 1)
    with reverted("SlashPending"):
        world.miner.client.finalize_reclaim(world.miner.hotkey)
    assert world.validators[1].client.attest(proposal).event("Slashed") is not None
    state = deposit(world)
    assert (state.amount, state.pending_reclaim) == (3 * TAO, 3 * TAO)  # the slash came first
    world.miner.client.finalize_reclaim(world.miner.hotkey)
    assert world.renter.client.owed(world.renter.address) == 2 * TAO
    # exactly the renter's compensation and the opener's bond remain
    assert world.balance(world.stack.collateral) == 2 * TAO + BOND


@pytest.mark.slow
def test_an_expired_proposal_stops_blocking_the_reclaim_without_anyone_closing_it(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    proposal = rental_slash(world)
    world.validators[0].client.attest(proposal)
    world.miner.client.request_reclaim(world.miner.hotkey, 5 * TAO)
    with reverted("ProposalNotExpired"):
        world.renter.client.expire(proposal)
    world.chain.advance(max(DELAY, TTL) + 1)
    assert deposit(world).open_proposals == 1  # nobody closed it ...
    assert (
        world.miner.client.finalize_reclaim(world.miner.hotkey).event("Reclaimed") is not None
    )  # ... no block
    closed = world.renter.client.expire(proposal)  # anyone closes it: the bond goes to the owner
    assert closed.event("ProposalExpired").args["bondTo"].lower() == world.miner.address  # type: ignore[union-attr]
    assert world.renter.client.owed(world.miner.address) == BOND
    assert world.balance(world.stack.collateral) == BOND


@pytest.mark.slow
def test_an_expired_proposal_opens_again_and_counts_only_fresh_attestations(world: World) -> None:
    """A cheat or failure attested slowly is not lost when its proposal expires: a fresh attestation
    opens it again (with a fresh bond); attestations of the expired opening do not count."""
    world.miner.client.deposit(5 * TAO)
    proposal = rental_slash(world)
    world.validators[2].client.attest(proposal)  # 40: opens, then nobody follows in time
    world.chain.advance(TTL + 1)
    reopened = world.validators[0].client.attest(proposal)  # 30: opens it again
    assert reopened.event("ProposalExpired") is not None and reopened.event("SlashProposed") is not None
    assert reopened.event("Slashed") is None  # 30 of the new opening, not 30 + 40
    assert world.validators[0].client.proposal(proposal).openings == 2
    assert world.validators[2].client.attest(proposal).event("Slashed") is not None  # 40 again: 70
    assert world.renter.client.owed(world.miner.address) == BOND  # the first opener's bond
    assert world.renter.client.owed(world.validators[0].address) == BOND  # the second's, back
    assert deposit(world).amount == 3 * TAO


@pytest.mark.slow
def test_blocking_a_reclaim_costs_a_bond_per_expiry_paid_to_the_miner(world: World) -> None:
    """A permitted hotkey with stake 1 opens proposals on evidence hashes of nothing: each opening
    costs it a bond; each blocks the reclaim only until it expires, and the bond goes to the miner."""
    griefer = world.party("griefer", stake=1, validator=True)
    world.miner.client.deposit(5 * TAO)
    world.miner.client.request_reclaim(world.miner.hotkey, 5 * TAO)
    bogus = [rental_slash(world, bytes([n]) * 32, evidence=bytes([n]) * 32) for n in (0x21, 0x22)]
    before = world.balance(griefer.address)
    paid = sum(griefer.client.attest(p).fee_wei for p in bogus)
    assert world.balance(griefer.address) == before - 2 * BOND - paid
    world.chain.advance(DELAY + 1)
    with reverted("SlashPending"):
        world.miner.client.finalize_reclaim(world.miner.hotkey)
    world.chain.advance(TTL)  # both expire: nobody needs to close them
    again = griefer.client.attest(bogus[0])  # opening again right away costs another bond
    assert again.event("SlashProposed") is not None
    world.chain.advance(TTL + 1)
    assert world.miner.client.finalize_reclaim(world.miner.hotkey).event("Reclaimed") is not None
    for p in bogus[1:]:
        world.miner.client.expire(p)
    world.miner.client.expire(bogus[0])
    assert world.renter.client.owed(world.miner.address) == 3 * BOND  # every opening paid the miner
    assert deposit(world).slashes == 0


def test_a_cancelled_reclaim_leaves_the_deposit_whole(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
    world.miner.client.request_reclaim(world.miner.hotkey, 5 * TAO)
    assert world.miner.client.cancel_reclaim(world.miner.hotkey).event("ReclaimCancelled")
    world.chain.advance(DELAY + 1)
    with reverted("NoReclaim"):
        world.miner.client.finalize_reclaim(world.miner.hotkey)
    assert deposit(world).standing == 5 * TAO


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
    from bittensor.sp_core import Keypair

    from compute.collateral.identity import hotkey_bytes32

    hotkey = Keypair.create_from_uri("//attacking-miner").ss58_address
    assert world.stack.mirror is not None
    world.stack.mirror.set_neuron(60, hotkey, 0, False)
    attacker, address = _attacker(world, uid=60)  # a contract speaking for a miner hotkey
    _call(world, attacker, "deposit", value=4 * TAO)
    world.miner.client.deposit(3 * TAO)  # someone else's money in the contract
    _call(world, attacker, "setMode", 1)
    _call(world, attacker, "reclaim", hotkey_bytes32(hotkey), 4 * TAO)
    world.chain.advance(DELAY + 1)
    _call(world, attacker, "finalize", hotkey_bytes32(hotkey))
    assert attacker.functions.reentries().call() == 0
    assert attacker.functions.blocked().call() == 1  # it tried, and the guard refused
    assert world.balance(address) == 4 * TAO
    assert world.balance(world.stack.collateral) == 3 * TAO


@pytest.mark.slow
def test_reentrant_claim_is_refused_and_a_refusing_renter_cannot_block_a_slash(world: World) -> None:
    attacker, address = _attacker(world, uid=99)
    world.miner.client.deposit(5 * TAO)
    _call(world, attacker, "setMode", 3)  # refuses every payment
    proposal = SlashProposal(
        world.miner.hotkey, KIND_FAILED_RENTAL, b"\x05" * 32, b"\x06" * 32, 1, address.lower()
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
    assert world.balance(world.stack.collateral) == 4 * TAO + BOND


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
        "attest",  # the opener's bond
        "deposit",
    ]
    assert not any(
        i["type"] == "function" and "owner" in i["name"].lower() and i["stateMutability"] != "view"
        for i in abi
    )


@pytest.mark.slow
def test_execute_completes_a_quorum_reached_after_stake_grew(world: World) -> None:
    world.miner.client.deposit(5 * TAO)
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
        ("open_bond", 0),
        ("open_bond", TAO + 1),
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
        open_bond=BOND,
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
            args["open_bond"],
        )


def test_windows_that_do_not_fit_together_are_refused_at_deploy() -> None:
    """The deployment this subnet once ran: a 3600 s proposal expiry under a one-day cheat window
    (a cheat proven two hours apart was never slashed) and a one-hour reclaim delay under 30-day
    leases (a miner could reclaim before its renter's failure was proposed)."""
    from compute.collateral.devchain import local_chain

    chain = local_chain()
    config = CollateralConfig(
        rate_per_gpu_day=TAO, min_deposit=TAO, reclaim_delay_s=3600, proposal_ttl_s=3600
    )
    with pytest.raises(CollateralError, match="cheat window") as refused:
        deploy_stack(chain.w3, chain.accounts[0], config, 27, doubles=True)
    assert "longest lease term" in str(refused.value)
    assert Windows().problems(2 * 86_400, 31 * 86_400) == []  # the production defaults fit
    assert WINDOWS.problems(TTL, DELAY) == []  # and so do this file's short ones


@pytest.mark.slow
def test_a_transaction_overtaken_on_chain_names_the_contracts_error(world: World, monkeypatch) -> None:
    """A peer's attestation executes the slash between this validator's estimate and its transaction's
    mining: the transaction fails on chain, and the error names why (before: a bare "reverted", which
    the desk took for a refusal of the evidence and assembled a second document of the incident)."""
    proposal = SlashProposal(world.miner.hotkey, KIND_CHEAT, b"\x05" * 32, b"\xee" * 32, 1)
    world.miner.client.deposit(3 * TAO)
    late = world.validators[1].client  # 30 of 100: its attestation alone opens the proposal
    eth = late.w3.eth  # every party's (one in-process chain)
    send, landed = eth.send_raw_transaction, []

    def overtaken(raw: bytes) -> bytes:
        if not landed:  # the late validator's transaction: 70 of 100 land first and execute the slash
            landed.append(True)
            quorum(world, proposal, voters=(0, 2))
        return send(raw)

    monkeypatch.setattr(eth, "send_raw_transaction", overtaken)
    with reverted("ProposalClosed") as caught:
        late.attest(proposal)
    assert "failed on chain" in str(caught.value)
    assert deposit(world).slashes == 1
