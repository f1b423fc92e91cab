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
from evm_world import RATE, make_world
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


def weights_loop(chain, store: ValidatorStore, validator, credit: CollateralCredit) -> WeightsLoop:
    """The real weights loop of ``validator``, its credit factors from ``credit``, every block."""
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
    return WeightsLoop(ctx, setter, interval_blocks=1)


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
        loop = weights_loop(chain, store, validator, credit)
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


# ------------------------------------------------------------------ when the endpoint misbehaves

DEADLINE = 1.5  # the transport's whole-call deadline in these tests (the validator's default: 10 s)
SLACK = 0.8  # scheduling on two shared cores


def scored_store(path, hotkeys: list[str]) -> ValidatorStore:
    """A store where each hotkey (uid = its index) was verified with one GPU and scored 1.0."""
    store = ValidatorStore(path)
    round_ = store.begin_round(1)
    for uid, hotkey in enumerate(hotkeys):
        store.record_result(
            PogResult(round_.round_id, uid, hotkey, ok=True, sample=1.0, gpu_count=1, credited_gpus=1)
        )
    store.finish_round(round_.round_id, [ScoreUpdate(uid, h, 1.0) for uid, h in enumerate(hotkeys)])
    return store


def graph(hotkeys: list[str]):
    class Graph:
        neurons = tuple(type("N", (), {"uid": uid, "hotkey": h})() for uid, h in enumerate(hotkeys))

    return Graph()


def hostile_client(url: str, address: str = "0x" + "11" * 20, deadline: float = DEADLINE) -> CollateralClient:
    from compute.collateral.rpc import RpcLimits, bounded_web3

    return CollateralClient(bounded_web3(url, RpcLimits(deadline_s=deadline)), address)


def test_an_endpoint_that_never_answers_costs_one_deadline_not_one_per_miner(tmp_path) -> None:
    """64 miners, 8 read at a time: the first failure makes the other 56 fall back at once."""
    from bittensor.sp_core import Keypair
    from hostile_rpc import HostileRpc

    hotkeys = [Keypair.create_from_uri(f"//credit-{i}").ss58_address for i in range(64)]
    store = scored_store(tmp_path / "validator.db", hotkeys)
    try:
        with HostileRpc("silent") as rpc:
            credit = CollateralCredit(hostile_client(rpc.url), store, FLOOR, timeout_s=DEADLINE + 5)
            start = time.monotonic()
            factors = asyncio.run(credit(graph(hotkeys)))  # type: ignore[arg-type]
            took = time.monotonic() - start
    finally:
        store.close()
        credit.close()
    assert factors == dict.fromkeys(range(64), FLOOR)
    assert took <= DEADLINE + SLACK, f"{took:.2f} s"
    reading = credit.last_reading
    assert reading is not None and (reading.read, reading.fell_back) == (0, 64)
    assert reading.why is not None and reading.why.startswith(f"EVM RPC {rpc.url}")
    assert rpc.connections <= 8  # the first wave only: nobody queued behind it


@pytest.mark.slow
def test_a_slow_endpoint_is_cut_off_at_the_readings_budget(tmp_path) -> None:
    """Every answer honest but 0.4 s late (under the deadline): the reading ends at its budget, what was
    read counts, the rest falls back."""
    from bittensor.sp_core import Keypair
    from hostile_rpc import HostileRpc

    from compute.collateral.devchain import rpc_app
    from compute.transport import serve_in_thread

    world = make_world()
    server = serve_in_thread(rpc_app(world.chain))
    hotkeys = [Keypair.create_from_uri(f"//slow-{i}").ss58_address for i in range(64)]
    store = scored_store(tmp_path / "validator.db", hotkeys)
    budget = 2.0
    try:
        with HostileRpc("slow", upstream=server.url, delay_s=0.4) as rpc:
            client = hostile_client(rpc.url, world.stack.collateral, deadline=10)  # each answer in time
            credit = CollateralCredit(client, store, FLOOR, timeout_s=15, budget_s=budget)
            start = time.monotonic()
            factors = asyncio.run(credit(graph(hotkeys)))  # type: ignore[arg-type]
            took = time.monotonic() - start
    finally:
        store.close()
        credit.close()
        server.stop()
    reading = credit.last_reading
    print(f"slow endpoint: {reading}")
    assert reading is not None and 0 < reading.read < 64 and reading.read + reading.fell_back == 64
    assert reading.why == f"not every deposit read within {budget:g} s"
    assert budget - 0.05 <= took <= budget + SLACK, f"{took:.2f} s"
    assert factors == dict.fromkeys(range(64), FLOOR)  # none of them posted: read or not, the floor


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["silent", "drip", "huge", "garbage", "nonsense"])
def test_a_misbehaving_endpoint_never_holds_the_weights_and_credit_falls_back(tmp_path, mode) -> None:
    """The real WeightsLoop: read once from the contract, then from a hostile endpoint. The weights are
    set within the deadline; a deposit read within the hour keeps its credit, an unread one earns the
    floor; past the hour every deposit is unread: the floor."""
    from bittensor.sp_core import Keypair
    from hostile_rpc import HostileRpc

    world = make_world()
    world.miner.client.deposit(RATE)  # one GPU-day: full credit
    state = SimChainState.create(tmp_path / "chain.db", netuid=NETUID, block_time=1.0, weights_rate_limit=0)
    chain = connect(f"sim:{tmp_path / 'chain.db'}", NETUID)
    validator = _wallet(tmp_path, "validator")
    state.register(validator.hotkey.ss58_address, validator.coldkeypub.ss58_address, 10_000.0, True)
    others = [Keypair.create_from_uri(f"//weights-{i}").ss58_address for i in range(20)]
    hotkeys = [world.miner.hotkey, *others]
    uids = [state.register(h, h, 10.0) for h in hotkeys]
    assert uids == list(range(1, 22))
    store = scored_store(tmp_path / "validator.db", [validator.hotkey.ss58_address, *hotkeys])
    store.record_presence("round", [PresenceEntry(uid, h, 1.0) for uid, h in zip(uids, hotkeys, strict=True)])
    credit = CollateralCredit(world.miner.client, store, FLOOR, timeout_s=DEADLINE + 5, budget_s=3 * DEADLINE)
    loop = weights_loop(chain, store, validator, credit)
    expected = {1: 1.0 / (1 + 20 * FLOOR), **{uid: FLOOR / (1 + 20 * FLOOR) for uid in uids[1:]}}
    try:
        asyncio.run(loop.run_step(chain.block()))  # the honest reading
        assert chain.weights(0) == pytest.approx(expected, abs=2e-4)
        with HostileRpc(mode) as rpc:
            credit.reader = hostile_client(rpc.url, world.stack.collateral)
            start = time.monotonic()
            asyncio.run(loop.run_step(chain.block()))
            took = time.monotonic() - start
            fresh_then = chain.weights(0)
            credit.clock = lambda: time.time() + 3601  # an hour on: the last read is stale
            asyncio.run(loop.run_step(chain.block()))
            stale_then = chain.weights(0)
    finally:
        store.close()
        chain.close()
        credit.close()
    print(f"{mode}: weights set {took:.2f} s after the step began")
    assert took <= DEADLINE + SLACK, f"{mode}: {took:.2f} s"
    assert fresh_then == pytest.approx(expected, abs=2e-4)  # the deposit read within the hour counts
    assert stale_then == pytest.approx({uid: 1 / 21 for uid in uids}, abs=2e-4)  # all unread: floor
    assert credit.last_reading is not None and credit.last_reading.read == 0
