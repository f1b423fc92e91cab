"""A miner "rents" its own GPU through a validator-permitted hotkey under its
own coldkey, then refuses every validation lease as rented. Played through the real round: real
miners on 127.0.0.1, the renters' leases made with the real ``register.py`` (operator CLI), the
receipts checked by ``RoundLoop`` against the simulated chain's metagraph."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import bittensor as bt
import pytest
from validator_helpers import FAKE_GPU, emulated_params, register_and_serve, validator_context

from compute.chain import connect
from compute.operator import main as register_main
from compute.scoring import ScoringConfig
from compute.store import PogResult, ScoreUpdate, ValidatorStore
from compute.validator import RoundLoop, chain_block_source
from compute.validator.rentals.receipts import ReceiptRejected, Renters, verify_receipt

SCORING = ScoringConfig()
VERIFIED = 3.3  # the miners' last verified sample: one H100 SXM
RENTED = VERIFIED * (1 + SCORING.rented_bonus)  # a verified rental proven there: 3.3 (no bonus)


def second_hotkey(wallet: bt.Wallet, name: str) -> bt.Wallet:
    """Another hotkey under ``wallet``'s coldkey (as ``btcli wallet new_hotkey`` makes one)."""
    other = bt.Wallet(name=wallet.name, hotkey=name, path=wallet.path)
    other.create_new_hotkey(suppress=True, overwrite=True)
    return other


def rent_with_register_py(chain_path: Path, wallet: bt.Wallet, uid: int, data_dir: Path) -> dict:
    """``register.py allocate --uid N --gpu-count 1 --duration 30d --json`` as its renter runs it."""
    out = io.StringIO()
    code = register_main(
        [
            *("--subtensor.network", f"sim:{chain_path}", "--netuid", "27"),
            *(
                "--wallet.name",
                wallet.name,
                "--wallet.hotkey",
                wallet.hotkey_str,
                "--wallet.path",
                wallet.path,
            ),
            *("--register.data_dir", str(data_dir), "--json"),
            *("allocate", "--uid", str(uid), "--gpu-count", "1", "--duration", "30d"),
        ],
        stdout=out,
    )
    answer = json.loads(out.getvalue())
    assert code == 0, answer
    return answer["lease"]


def seed_verified(store: ValidatorStore, uids: dict[str, int], hotkeys: dict[str, str]) -> None:
    """One finished round in which both miners proved one H100 (their history before the rental)."""
    record = store.begin_round(1)
    for name, uid in uids.items():
        store.record_result(
            PogResult(
                record.round_id,
                uid,
                hotkeys[name],
                ok=True,
                sample=VERIFIED,
                models=("H100 SXM",),
                gpu_count=1,
            )
        )
    store.finish_round(
        record.round_id, [ScoreUpdate(uid, hotkeys[name], VERIFIED) for name, uid in uids.items()]
    )


@pytest.mark.slow
async def test_a_renter_on_the_miners_own_coldkey_earns_no_rented_credit(
    tmp_path: Path, sim_chain, start_miner, validator_client, make_wallet
) -> None:
    path, state = sim_chain
    vwallet = validator_client.wallet_obj
    state.register(vwallet.hotkey.ss58_address, vwallet.coldkeypub.ss58_address, 5000.0, True)
    miners = {  # two machines, one H100 each (distinct GPUs: no shared device)
        name: start_miner(name, gpus=(FAKE_GPU.model_copy(update={"uuid": f"GPU-{name}"}),))
        for name in ("self-renter", "rented")
    }
    uids = {name: register_and_serve(path, state, miner) for name, miner in miners.items()}
    # the cheat: a validator-permitted hotkey under the miner's own coldkey; the control: a real renter
    own = second_hotkey(miners["self-renter"].wallet, "renter")
    real = make_wallet("real-renter")
    for renter in (own, real):
        state.register(renter.hotkey.ss58_address, renter.coldkeypub.ss58_address, 5000.0, True)
    own_lease = await asyncio.to_thread(
        rent_with_register_py, path, own, uids["self-renter"], tmp_path / "own"
    )
    real_lease = await asyncio.to_thread(rent_with_register_py, path, real, uids["rented"], tmp_path / "real")
    assert own_lease["time_left_s"] > 29 * 86400 and real_lease["time_left_s"] > 29 * 86400
    chain = connect(f"sim:{path}", 27)
    store = ValidatorStore(tmp_path / "validator.db")
    try:
        seed_verified(store, uids, {name: m.hotkey for name, m in miners.items()})
        ctx = validator_context(
            chain, store, validator_client, hotkey=vwallet.hotkey.ss58_address, params=emulated_params()
        )
        loop = RoundLoop(ctx, interval_blocks=1, concurrency=2, step_timeout=120, show_table=False)
        await loop.run_step(await chain_block_source(chain)())
        results = {r.uid: r for r in store.results(2)}
        cheat, control = results[uids["self-renter"]], results[uids["rented"]]
        # the self-renter's receipt is real, signed, alive and from a permitted hotkey: still no rental
        assert not cheat.ok and cheat.sample == 0.0 and not cheat.rented
        assert "own coldkey" in cheat.reasons[0], cheat.reasons
        # the same lease from a renter on another coldkey is credited as before (honest miners unmoved)
        assert control.ok and control.rented and control.sample == pytest.approx(RENTED)
        scores = store.scores()
        assert scores[uids["self-renter"]].score == pytest.approx(VERIFIED * (1 - SCORING.ema_alpha))
        assert scores[uids["rented"]].score == pytest.approx(VERIFIED)  # keeps its credit
    finally:
        store.close()
        chain.close()


def test_same_owner_is_the_miners_hotkey_or_any_hotkey_of_its_coldkey() -> None:
    renters = Renters(
        frozenset({"v1", "v2"}), {"miner": "cold-m", "v1": "cold-m", "v2": "cold-v", "other": "cold-o"}
    )
    assert renters.same_owner("miner", "miner") and renters.same_owner("v1", "miner")
    assert not renters.same_owner("v2", "miner")
    assert not renters.same_owner("unregistered", "miner")  # unknown coldkey: judged by trust alone
    assert not Renters(frozenset({"v1"})).same_owner("v1", "miner")  # no metagraph: nothing to compare


async def test_a_self_rental_receipt_is_rejected_whatever_the_renters_permit(
    start_miner, validator_client, make_wallet
) -> None:
    from compute.protocol import AllocateRequest, RentalReceiptsRequest, Requirements
    from compute.transport import KeyWallet, MinerClient

    miner = start_miner("m", gpus=(FAKE_GPU,))
    own = second_hotkey(miner.wallet, "renter")
    request = AllocateRequest(
        requirements=Requirements(gpu_count=1),
        duration_s=30 * 86400,
        ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
    )
    async with MinerClient(KeyWallet.from_wallet(own)) as renter:
        await renter.call(miner.endpoint, miner.hotkey, request)
    (receipt,) = (await validator_client.call(miner.endpoint, miner.hotkey, RentalReceiptsRequest())).receipts
    coldkeys = {
        miner.hotkey: miner.wallet.coldkeypub.ss58_address,
        own.hotkey.ss58_address: own.coldkeypub.ss58_address,
    }
    trusted = frozenset({own.hotkey.ss58_address})
    now = receipt.created_at + 1
    assert verify_receipt(receipt, miner.hotkey, Renters(trusted), now).gpu_count == 1  # coldkeys unknown
    with pytest.raises(ReceiptRejected, match="own coldkey"):
        verify_receipt(receipt, miner.hotkey, Renters(trusted, coldkeys), now)
