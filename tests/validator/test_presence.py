"""Presence over time: credit = proven capacity x presence share, played through the real code.

Pure tables first (share, ramp, schedule, load); then real rounds and real presence checks (signed
miner apps on 127.0.0.1, embedded SSH leases, the real worker) against one emulated device
(``compute.localnet.one_device``) behind several hotkeys, and a device that is there only
sometimes. The device's honest share is its capacity score with a presence share of 1.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from test_lockstep import device_miner
from validator_helpers import register_and_serve, validator_context

from compute.chain import connect
from compute.localnet.one_device import send_away
from compute.scoring import presence_credit, presence_shares
from compute.store import ValidatorStore
from compute.validator import PresenceLoop, RoundLoop, chain_block_source, weights_from_scores
from compute.validator.presence.schedule import next_delay, presence_interval, presence_load, split_budget
from compute.validator.round.loop import stored_shares
from compute.validator.round.schedule import check_probability, validation_load


# ---------------------------------------------------------------- pure
def test_share_is_the_mean_over_the_window_and_missing_history_is_absence() -> None:
    checks = [{"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 0.0}, {"a": 1.0}, {"a": 1.0, "new": 1.0}]
    shares = presence_shares(checks, window=4)
    assert shares == {"a": 1.0, "b": 0.25, "new": 0.25}  # "new" ramps: its first check counts 1 of 4
    assert presence_shares(checks, window=2) == {"a": 1.0, "new": 0.5}  # "b" aged out of the window
    assert presence_shares([], window=4) is None  # no check yet: no share, no weights
    assert presence_shares([{"x": 7.0, "y": -1.0}]) == {"x": 1.0, "y": 0.0}  # verdicts clipped


def test_credit_is_capacity_times_share_and_never_more() -> None:
    shares = {"a": 0.5}
    assert presence_credit(3.0, "a", shares) == 1.5
    assert presence_credit(3.0, "unknown", shares) == 0.0
    assert presence_credit(3.0, "a", None) == 0.0


def test_one_device_behind_many_hotkeys_shares_one_presence_per_check() -> None:
    """Each check finds the device behind at most one hotkey: the shares of k hotkeys sum to at most
    one, whatever the device's schedule (seeded random rotation over 1-32 hotkeys)."""
    rng = random.Random(3)
    for hotkeys in (1, 2, 12, 32):
        checks = []
        for _ in range(40):
            holder = rng.randrange(hotkeys + 1)  # the device is behind one hotkey, or away
            checks.append({f"hk{i}": float(i == holder) for i in range(hotkeys)})
        shares = presence_shares(checks, window=16)
        assert shares is not None and sum(shares.values()) <= 1.0 + 1e-12


def test_budget_split_keeps_all_validators_within_the_load_budget() -> None:
    interval_s = 360 * 12.0
    throughput, presence = split_budget(0.05, 0.4)
    assert (throughput, presence) == pytest.approx((0.03, 0.02))
    for validators in (1, 8, 64):
        p = check_probability(validators, interval_s, 45.0, throughput)
        mean = presence_interval(validators, 10.0, presence)
        load = validation_load(validators, interval_s, 45.0, p) + presence_load(validators, 10.0, mean)
        assert load <= 0.05 + 1e-9, (validators, load)
    assert math.isinf(
        presence_interval(8, 10.0, 0.0)
    )  # no presence budget: no checks (the demo's rounds are)


def test_check_moments_are_memoryless() -> None:
    rng = random.Random(11)
    delays = [next_delay(100.0, rng) for _ in range(4000)]
    assert sum(delays) / len(delays) == pytest.approx(100.0, rel=0.06)
    late = [d - 100.0 for d in delays if d > 100.0]  # waited 100 s already: still 100 s to go on average
    assert sum(late) / len(late) == pytest.approx(100.0, rel=0.15)


# ---------------------------------------------------------------- cheats through the real code
@pytest.fixture
def pool_net(tmp_path: Path, sim_chain, make_wallet, validator_client):
    """Factory: ``honest`` CPU miners and ``hotkeys`` hotkeys on one emulated device; the loops."""
    opened: list = []

    def make(honest: int, hotkeys: int, concurrency: int = 16):
        path, state = sim_chain
        wallet = validator_client.wallet_obj
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0, True)
        device = tmp_path / "device.lock"
        miners = {
            f"honest{i}": device_miner(tmp_path, make_wallet, f"honest{i}", None) for i in range(honest)
        }
        miners |= {  # a lease takes the device at its build, or says at once that it is busy
            f"pool{i}": device_miner(tmp_path, make_wallet, f"pool{i}", device, "try-build")
            for i in range(hotkeys)
        }
        uids = {name: register_and_serve(path, state, miner) for name, miner in miners.items()}
        chain = connect(f"sim:{path}", 27)
        store = ValidatorStore(tmp_path / "validator.db")
        own = wallet.hotkey.ss58_address
        ctx = validator_context(chain, store, validator_client, hotkey=own)  # one timed lock for both
        rounds = RoundLoop(
            ctx, interval_blocks=1, concurrency=concurrency, step_timeout=300, show_table=False
        )
        presence = PresenceLoop(ctx, presence_s=10.0, presence_budget=0.02)
        opened.append((store, chain, miners))
        return chain, store, uids, miners, rounds, presence, device

    yield make
    for store, chain, miners in opened:
        store.close()
        chain.close()
        for miner in miners.values():
            miner.server.stop()


def credits(store, chain, own: str, window: int = 16) -> dict[int, float]:
    """Each uid's credit as the weights see it: capacity score x presence share."""
    shares = stored_shares(store, window)
    return {
        uid: presence_credit(rec.score, rec.hotkey, shares)
        for uid, rec in store.scores().items()
        if rec.hotkey != own
    }


@pytest.mark.slow
async def test_one_device_behind_three_hotkeys_earns_one_device_share(pool_net, validator_client) -> None:
    """Findings 3 and 4, played for real: three hotkeys on one device are tested APART in their
    first round (one window each: each proves full capacity, the first-round windfall), then two
    presence checks find the device behind at most one of them at each moment. The pool's credit
    is at most one device's capacity x 1, while the honest miners keep a share of 1."""
    chain, store, uids, miners, rounds, presence, _ = pool_net(1, 3, concurrency=1)
    await rounds.run_step(await chain_block_source(chain)())
    round1 = {r.uid: r for r in store.results(1)}
    pool = [uids[f"pool{i}"] for i in range(3)]
    assert sum(round1[uid].sample > 0 for uid in pool) >= 2, [
        round1[uid].reasons for uid in pool
    ]  # the windfall
    assert store.presence_count() == 0  # several windows: the round is no presence check
    assert round1[uids["honest0"]].ok, round1[uids["honest0"]].reasons
    for _ in range(2):
        check_id = await presence.check_now()
        fractions = store.presence_checks(1)[0].fractions()
        assert store.presence_checks(1)[0].check_id == check_id
        assert sum(fractions.get(miners[f"pool{i}"].hotkey, 0.0) for i in range(3)) <= 1.0, fractions
        assert fractions[miners["honest0"].hotkey] == 1.0, store.presence_checks(1)[0].entries
    own = validator_client.wallet_obj.hotkey.ss58_address
    credit = credits(store, chain, own)
    scores = store.scores()
    device = max(scores[uid].score for uid in pool)  # the device's capacity, proven alone
    assert sum(credit[uid] for uid in pool) <= device * 1.0 + 1e-12
    assert credit[uids["honest0"]] == pytest.approx(scores[uids["honest0"]].score)  # share 1: unmoved
    weights = weights_from_scores(scores, chain.metagraph(), own, 0.0, stored_shares(store, 16))
    assert sum(weights.get(uid, 0.0) for uid in pool) <= 1.0


class DeviceAway:
    """The device is elsewhere while the context is open (its leases find no device)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> DeviceAway:
        send_away(self.path)
        return self

    def __exit__(self, *exc: object) -> None:
        send_away(self.path, away=False)


@pytest.mark.slow
async def test_hit_and_run_is_credited_for_the_time_its_device_is_there(pool_net, validator_client) -> None:
    """A fresh hotkey proves its device in its first round, then the device is away at
    two of three presence checks: its credit is a third of its capacity (the share of checks it was
    there), never the full score a snapshot gave it; the honest miner keeps all of its own."""
    chain, store, uids, miners, rounds, presence, device = pool_net(1, 1)
    await rounds.run_step(await chain_block_source(chain)())
    hit = uids["pool0"]
    assert {r.uid: r for r in store.results(1)}[hit].sample > 0  # proven while it was there
    assert store.presence_count() == 1  # one window over everyone: the round was a presence check too
    with DeviceAway(device):
        await presence.check_now()
        await presence.check_now()
    await presence.check_now()
    own = validator_client.wallet_obj.hotkey.ss58_address
    shares = stored_shares(store, 16)
    assert shares is not None
    assert shares[miners["pool0"].hotkey] == pytest.approx(2 / 4)  # the round and the last check
    assert shares[miners["honest0"].hotkey] == 1.0
    entries = {e.hotkey: e for e in store.presence_checks(3)[0].entries}
    assert (
        entries[miners["pool0"].hotkey].fraction == 0.0 and "absent" in entries[miners["pool0"].hotkey].reason
    )
    credit = credits(store, chain, own)
    assert credit[hit] == pytest.approx(store.scores()[hit].score * 0.5)
