"""Collateral scales credit: the real WeightsLoop reads every miner's deposit from the real contract
(the local EVM over JSON-RPC) and sets weights on the simulated chain.

Each miner below was verified with the same score; what differs is only what it posted. The honest
deposit earns full credit; every way around posting it — nothing, too little for the proven GPUs,
a deposit asked back right after it was read, a second hotkey on the machine of a miner that did
deposit — earns the floor of the ramp at most. A deposit is the hotkey's: a miner that reports
another GPU set (here: a different set than the one it told another validator) has the same one
deposit, measured against the GPUs this validator proved.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from story import NETUID, TAO, _wallet

from compute import VERSION_KEY
from compute.chain import SimChainState, connect
from compute.collateral.chain import CollateralClient
from compute.collateral.devchain import serve_local
from compute.collateral.standing import standing_path
from compute.scoring import ScoringConfig, load_gpu_table
from compute.store import PogResult, PresenceEntry, ScoreUpdate, ValidatorStore
from compute.validator import RoundParams, ValidatorContext, WeightSetter, WeightsLoop
from compute.validator.collateral.credit import CollateralCredit

FLOOR = 0.5
# name -> (verified GPU UUIDs, credited GPUs, TAO deposited in how many parts, reclaim asked)
MINERS = {
    "honest": (("GPU-h1", "GPU-h2"), 2, 2.0, 1, False),
    "nothing": (("GPU-n1", "GPU-n2"), 2, 0.0, 1, False),
    "half": (("GPU-f1", "GPU-f2"), 2, 1.0, 1, False),
    "asked-back": (("GPU-r1", "GPU-r2"), 2, 2.0, 1, True),
    # showed this validator another GPU set than the others, and "deposited once per identity":
    # one hotkey, one deposit, measured against the two GPUs this validator proved
    "split-identity": (("GPU-s9", "GPU-s8"), 2, 2.0, 2, False),
    "second-hotkey": (("GPU-h1", "GPU-h2"), 2, 0.0, 1, False),  # honest's box, under another hotkey
    "more-gpus": (("GPU-m1", "GPU-m2", "GPU-m3", "GPU-m4"), 4, 1.0, 1, False),  # posted for one GPU
}
EXPECTED = {
    "honest": 1.0,
    "nothing": FLOOR,
    "half": 0.75,
    "asked-back": FLOOR,
    "split-identity": 1.0,
    "second-hotkey": FLOOR,
    "more-gpus": 0.625,
}


@pytest.mark.slow
def test_weights_scale_by_collateral_and_every_dodge_earns_the_floor_at_most(tmp_path) -> None:
    state = SimChainState.create(tmp_path / "chain.db", netuid=NETUID, block_time=1.0, weights_rate_limit=0)
    chain = connect(f"sim:{tmp_path / 'chain.db'}", NETUID)
    evm = serve_local(NETUID)
    store = ValidatorStore(tmp_path / "validator.db")
    try:
        validator = _wallet(tmp_path, "validator")
        state.register(validator.hotkey.ss58_address, validator.coldkeypub.ss58_address, 10_000.0, True)
        from web3 import Web3

        w3 = Web3(Web3.HTTPProvider(evm.url))
        round_ = store.begin_round(1)
        uids = {}
        for name, (uuids, gpus, tao, parts, reclaim) in MINERS.items():
            wallet = _wallet(tmp_path, name)
            uid = state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 10.0)
            uids[name] = uid
            account = evm.account()
            chain.associate_evm_key(wallet, account)
            evm.mirror(state, NETUID)
            if tao:
                client = CollateralClient(w3, evm.address, account)
                for _ in range(parts):
                    client.deposit(int(tao * TAO) // parts)
                if reclaim:  # the right moment: posted while being read, asked back right after
                    client.request_reclaim(wallet.hotkey.ss58_address, int(tao * TAO))
            store.record_result(
                PogResult(
                    round_.round_id,
                    uid,
                    wallet.hotkey.ss58_address,
                    ok=True,
                    sample=1.0,
                    gpu_count=gpus,
                    credited_gpus=gpus,
                    gpu_uuids=uuids,
                    created=time.time(),
                )
            )
        store.finish_round(
            round_.round_id,
            [ScoreUpdate(uid, state.neurons(NETUID)[uid].hotkey, 1.0) for uid in uids.values()],
        )
        # every miner present at the round's one moment (presence share 1): only collateral differs
        store.record_presence(
            "round", [PresenceEntry(uid, state.neurons(NETUID)[uid].hotkey, 1.0) for uid in uids.values()]
        )
        credit = CollateralCredit(
            CollateralClient(w3, evm.address), store, FLOOR, publish=standing_path(tmp_path)
        )
        setter = WeightSetter(chain, validator, store, VERSION_KEY, backoff_s=0.1)
        ctx = ValidatorContext(
            chain,
            store,
            None,
            validator.hotkey.ss58_address,
            RoundParams(round_id=0, block=0),
            load_gpu_table(),
            ScoringConfig(),
            credit_factors=credit,
        )
        loop = WeightsLoop(ctx, setter, interval_blocks=1)
        asyncio.run(loop.run_step(chain.block()))
        weights = chain.weights(0)
        hotkeys = {name: state.neurons(NETUID)[uid].hotkey for name, uid in uids.items()}
        shown = public_feed(tmp_path, store, uids, hotkeys)
    finally:
        store.close()
        chain.close()
        evm.stop()
    # what a renter sees in the validator's public feed before renting: the contract's figures
    assert shown[hotkeys["honest"]]["standing_tao"] == 2.0
    asked = shown[hotkeys["asked-back"]]
    assert (asked["standing_tao"], asked["pending_reclaim_tao"]) == (0.0, 2.0) and asked["reclaim_at"] > 0
    assert shown[hotkeys["nothing"]]["standing_tao"] == 0.0
    total = sum(EXPECTED.values())
    for name, factor in EXPECTED.items():
        assert weights[uids[name]] == pytest.approx(factor / total, abs=2e-4), name
    honest = weights[uids["honest"]]
    for name in EXPECTED:
        if EXPECTED[name] < 1.0:
            assert weights[uids[name]] <= 0.75 * honest + 1e-4, (
                f"{name} earned {weights[uids[name]] / honest:.2f}x honest"
            )


def public_feed(root, store: ValidatorStore, uids: dict, hotkeys: dict) -> dict:
    """The validator's public machine feed (the dashboard's routes over its store): collateral per hotkey."""
    import httpx
    from fastapi import FastAPI

    from compute.dashboard.feed_routes import FEED_PATH, add_feed_routes
    from compute.transport import serve_in_thread

    store.sync_miners([(uid, hotkeys[name]) for name, uid in uids.items()])
    app = FastAPI()
    add_feed_routes(app, root / "validator.db")
    server = serve_in_thread(app)
    try:
        feed = httpx.get(server.url + FEED_PATH, timeout=30).json()
    finally:
        server.stop()
    return {m["hotkey"]: m["collateral"] for m in feed["machines"]}


def test_an_unreadable_contract_counts_no_deposit(tmp_path) -> None:
    """A validator that cannot read the chain gives the floor (never full credit) to a miner it never read."""
    from web3 import Web3

    store = ValidatorStore(tmp_path / "validator.db")
    round_ = store.begin_round(1)
    store.record_result(
        PogResult(
            round_.round_id, 1, "5" * 48, ok=True, sample=1.0, gpu_uuids=("GPU-1",), created=time.time()
        )
    )
    store.finish_round(round_.round_id, [ScoreUpdate(1, "5" * 48, 1.0)])
    dead = CollateralClient(Web3(Web3.HTTPProvider("http://127.0.0.1:9")), "0x" + "11" * 20)
    credit = CollateralCredit(dead, store, FLOOR, timeout_s=5)

    class Graph:
        neurons = (type("N", (), {"uid": 1, "hotkey": "5" * 48})(),)

    try:
        factors = asyncio.run(credit(Graph()))  # type: ignore[arg-type]
    finally:
        store.close()
    assert factors == {1: FLOOR}
