"""The feed's price and free/rented-now: from the validator's latest probe and test, with their age;
its public fields an allow-list; old feeds and old store files still read; the renter's client."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dashkit import Clock, h100

from compute.dashboard.feed import FeedMachine, FeedNow, FeedPrice, MachineFeed, build_feed
from compute.dashboard.feed_page import render_feed_page
from compute.operator.feed import _verified
from compute.operator.output import proof_json
from compute.protocol import Price
from compute.store import Offer, ScoreUpdate, ValidatorStore
from compute.store.feed import FeedReader

T0 = 1_700_000_000.0
PRICE = Price(base_hour=0.1, gpu_hour={"NVIDIA H100 80GB HBM3": 2.5}).model_dump_json()

# Every field the public feed publishes per machine: a new one is added here on purpose.
MACHINE_FIELDS = {
    "uid",
    "hotkey",
    "gpu_model",
    "gpu_count",
    "tflops_fp16",
    "tflops_fp32",
    "memory_gb",
    "bandwidth_gbs",
    "hosts_credited",
    "first_proven_at",
    "last_proven_at",
    "last_passed_at",
    "windows",
    "daily",
    "recent",
    "collateral",
    "price",  # what the miner signed in its latest availability answer; never scored
    "now",  # free / rented at the validator's latest test or probe, and when
}


def offer_store(path: Path) -> Path:
    """uid 1 tested (free) at T0, probed at T0 + 60 with 1 lease and 1 of 2 GPUs free, price set;
    uid 2 tested while rented at T0, probed before that, no price; uid 3 never tested nor probed."""
    clock = Clock(T0)
    store = ValidatorStore(path, clock=clock)
    store.sync_miners([(1, "hk-one"), (2, "hk-two"), (3, "hk-three")])
    rnd = store.begin_round(block=10)
    store.record_result(h100(rnd.round_id, 1, "hk-one", created=T0))
    store.record_result(h100(rnd.round_id, 2, "hk-two", created=T0, rented=True))
    store.finish_round(rnd.round_id, [ScoreUpdate(1, "hk-one", 1.0)])
    store.record_offer(1, "hk-one", Offer(T0 + 60, PRICE, free_gpus=1, active_leases=1))
    store.record_offer(2, "hk-two", Offer(T0 - 600, None, free_gpus=2, active_leases=0))
    store.close()
    return path


def test_the_feed_carries_the_signed_price_and_the_latest_look_with_its_time(tmp_path: Path) -> None:
    feed = build_feed(FeedReader(offer_store(tmp_path / "v.db")).read(T0 + 120), "5Validator")
    one, two, three = feed.machines
    assert one.price == FeedPrice(base_hour=0.1, gpu_hour={"NVIDIA H100 80GB HBM3": 2.5}, seen_at=T0 + 60)
    assert one.price.hourly(2) == 5.1
    assert one.now == FeedNow(state="partly rented", source="probe", seen_at=T0 + 60, free_gpus=1)
    # the validator's own test (rented) is newer than the miner's answer (free): the test wins
    assert two.price is None and two.now == FeedNow(state="rented", source="test", seen_at=T0)
    assert three.price is None and three.now is None
    page = render_feed_page(feed)
    assert "partly rented" in page and "$2.5/GPU·h<br>all 2: $5.1/h" in page
    assert "no price" in page and "not seen" in page and "never enter a score" in page


def test_the_public_fields_are_an_allow_list() -> None:
    assert set(FeedMachine.model_fields) == MACHINE_FIELDS
    assert set(FeedPrice.model_fields) == {"currency", "base_hour", "gpu_hour", "seen_at"}
    assert set(FeedNow.model_fields) == {"state", "source", "seen_at", "free_gpus"}


def test_an_older_feed_and_an_older_store_file_still_read(tmp_path: Path) -> None:
    path = offer_store(tmp_path / "v.db")
    with sqlite3.connect(path) as conn:  # a store written before the offers table
        conn.execute("DROP TABLE offers")
    feed = build_feed(FeedReader(path).read(T0 + 120))
    assert [m.price for m in feed.machines] == [None, None, None]
    assert feed.machines[0].now == FeedNow(state="free", source="test", seen_at=T0)
    old = feed.model_dump(mode="json")
    for machine in old["machines"]:
        del machine["price"], machine["now"]
    again = MachineFeed.model_validate(old)
    assert again.kind == "machine_feed.v1" and again.machines[0].now is None
    newer = {**old, "machines": [{**m, "a_later_field": 1} for m in old["machines"]]}
    assert MachineFeed.model_validate(newer).machines[0].uid == 1


def test_a_price_the_miner_wrote_badly_is_left_out(tmp_path: Path) -> None:
    store = ValidatorStore(tmp_path / "v.db")
    store.sync_miners([(1, "hk-one")])
    store.record_offer(1, "hk-one", Offer(T0, '{"gpu_hour": {"x": -1}}', free_gpus=0, active_leases=2))
    store.close()
    (machine,) = build_feed(FeedReader(tmp_path / "v.db").read(T0 + 1)).machines
    assert machine.price is None and machine.now is not None and machine.now.state == "rented"


def test_the_renters_feed_client_shows_the_validators_last_look_and_price(tmp_path: Path) -> None:
    feed = build_feed(FeedReader(offer_store(tmp_path / "v.db")).read(T0 + 120))
    proof = _verified(feed.machines[0])
    assert proof is not None
    shown = proof_json(proof)
    assert shown is not None
    assert (shown["seen_state"], shown["seen_at"], shown["feed_price_per_hour"]) == (
        "partly rented",
        T0 + 60,
        5.1,
    )
