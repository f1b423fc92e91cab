"""Who signs a canary: identities a miner cannot link to a validator on chain; the validator's own
hotkey only for miners that admit no ordinary renter (or when no ordinary identity is usable)."""

from __future__ import annotations

import random
from pathlib import Path

from compute.chain import MetagraphSnapshot, NeuronInfo
from compute.validator import CanaryRenter
from compute.validator.fleet.canaries import CLOSED_OWN_SHARE, CanaryDesk
from compute.validator.rentals.ledger import RentalLedger


def neuron(uid: int, hotkey: str, coldkey: str, permit: bool = False) -> NeuronInfo:
    return NeuronInfo(uid, hotkey, coldkey, 1000.0 if permit else 1.0, permit, None, True, 0)


METAGRAPH = MetagraphSnapshot(
    27,
    100,
    (
        neuron(0, "me", "cold-me", permit=True),  # this validator
        neuron(1, "me-op", "cold-me"),  # an operator key of its own wallet: on its coldkey
        neuron(2, "other", "cold-other", permit=True),  # another validator
        neuron(3, "other-op", "cold-other"),  # and a key registered beside it
        neuron(4, "op", "cold-op"),  # an operator identity on a coldkey of its own
        neuron(5, "op2", "cold-op2"),
        neuron(6, "miner", "cold-miner"),
    ),
)


def desk(tmp_path: Path, *names: str, seed: int = 1) -> CanaryDesk:
    renters = [CanaryRenter("me", None, tmp_path / "me", validator=True)]  # type: ignore[arg-type]
    renters += [CanaryRenter(name, None, tmp_path / name) for name in names]  # type: ignore[arg-type]
    return CanaryDesk(renters, RentalLedger(), random.Random(seed))


def test_only_identities_no_validator_holds_on_chain_sign_canaries(tmp_path: Path) -> None:
    signers = desk(tmp_path, "me-op", "other-op", "op", "op2", "unregistered").signers(METAGRAPH)
    assert [r.hotkey for r in signers.ordinary] == ["op", "op2"]  # linked or unregistered: not used
    assert signers.own is not None and signers.own.hotkey == "me"


def test_an_open_miner_meets_every_ordinary_identity_in_turn_and_never_the_validators_own(
    tmp_path: Path,
) -> None:
    d = desk(tmp_path, "op", "op2")
    signers = d.signers(METAGRAPH)
    drawn = [d.signer_for("miner", signers) for _ in range(20)]
    assert {r.hotkey for r in drawn if r is not None} == {"op", "op2"}
    assert all({drawn[i].hotkey, drawn[i + 1].hotkey} == {"op", "op2"} for i in range(0, 20, 2))  # type: ignore[union-attr]


def test_a_closed_miner_gets_the_validators_own_hotkey_and_now_and_then_an_ordinary_one(
    tmp_path: Path,
) -> None:
    d = desk(tmp_path, "op")
    signers = d.signers(METAGRAPH)
    d._closed.add("miner")  # an earlier ordinary canary found its access policy closed
    drawn = [d.signer_for("miner", signers) for _ in range(400)]
    own = sum(r is not None and r.hotkey == "me" for r in drawn) / len(drawn)
    assert abs(own - CLOSED_OWN_SHARE) < 0.07 and all(r is not None for r in drawn)
    alone = desk(tmp_path, "me-op")  # no usable ordinary identity: the validator's own hotkey
    assert alone.signer_for("miner", alone.signers(METAGRAPH)).hotkey == "me"  # type: ignore[union-attr]
