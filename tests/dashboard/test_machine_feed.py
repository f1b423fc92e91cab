"""The public machine feed: history over 7 and 30 days from the validator's own results, nothing an
attacker could use, rate limited, rebuilt at most once per interval; over real HTTP on 127.0.0.1."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dashkit import Clock, h100
from fastapi import FastAPI

from compute.dashboard.feed import MachineFeed
from compute.dashboard.feed_routes import FEED_PATH, PAGE_PATH, add_feed_routes
from compute.dashboard.ratelimit import RateLimiter
from compute.store import ScoreUpdate, ValidatorStore
from compute.store.feed import DayCount, FeedReader, machine_history
from compute.transport import RunningServer, serve_in_thread

DAY = 86_400.0
START = 1_700_000_000.0
NOW = START + 40 * DAY
UUID = "GPU-5f3c1d2e-aaaa-bbbb-cccc-0123456789ab"
SECRETS = (UUID, "10.0.0.7", "rack1-a", "ssh -p 40012", "internal reason")


def history_store(path: Path) -> Path:
    """41 days, one round a day (the last an hour before NOW): uid 1 proven throughout except on
    days 14, 18, ... 38 (failed with an internal reason), rented on days 35-36; uid 2 a multi-host
    miner proven on the last 5 days only; uid 3 registered, never tested; uid 4's slot changed hands
    on day 38 (the new hotkey passed once; the old one's history is not its own)."""
    clock = Clock(START)
    store = ValidatorStore(path, clock=clock)
    store.sync_miners([(1, "hk-one"), (2, "hk-two"), (3, "hk-three"), (4, "hk-old")])
    for day in range(41):
        clock.now = START + day * DAY + (0 if day < 40 else -3600)
        if day == 38:
            store.sync_miners([(1, "hk-one"), (2, "hk-two"), (3, "hk-three"), (4, "hk-new")])
        rnd = store.begin_round(block=100 * (day + 1))
        failed = day >= 10 and day % 4 == 2
        one = dict(created=clock.now, gpu_uuids=(UUID, UUID), rented=day in (35, 36))
        if failed:
            one |= dict(ok=False, sample=0.0, reasons=("internal reason: ssh -p 40012 10.0.0.7 refused",))
        store.record_result(h100(rnd.round_id, 1, "hk-one", **one))
        if day >= 36:
            hosts = {"rack1-a": 1.0, "rack1-b": 0.0}
            store.record_result(
                h100(rnd.round_id, 2, "hk-two", created=clock.now, hosts=hosts, shared_with=(1,))
            )
        if day < 38:
            store.record_result(h100(rnd.round_id, 4, "hk-old", created=clock.now))
        elif day == 39:
            store.record_result(h100(rnd.round_id, 4, "hk-new", created=clock.now, tflops_fp16=9.0))
        store.finish_round(rnd.round_id, [ScoreUpdate(1, "hk-one", 1.0)])
    store.close()
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return history_store(tmp_path / "validator-27.db")


def test_history_counts_the_validators_own_tests_per_day_and_window(store: Path) -> None:
    history = {m.hotkey: m for m in machine_history(store, now=NOW).machines}
    assert list(history) == ["hk-one", "hk-two", "hk-three", "hk-new"]
    one = history["hk-one"]
    # the last 30 x 24 h hold days 11..40; days 14, 18, ..., 38 failed; 35 and 36 passed while rented
    assert one.window(30) == DayCount(tested=30, passed=23, rented=2)
    assert one.window(7) == DayCount(tested=7, passed=5, rented=2)  # days 34..40
    assert one.first_proven == START and one.last_passed == NOW - 3600
    assert [v for _, v in one.recent][-8:] == [
        "verified",
        "failed",
        "rented",
        "rented",
        "verified",
        "failed",
        "verified",
        "verified",
    ]
    assert history["hk-three"].window(30).tested == 0 and history["hk-three"].proven is None
    new = history["hk-new"]  # the slot's new owner: only its own test counts
    assert new.window(30).tested == 1 and new.first_proven == START + 39 * DAY
    assert new.proven is not None and new.proven.tflops_fp16 == 9.0


@pytest.fixture
def server(store: Path) -> Iterator[RunningServer]:
    app = FastAPI()
    add_feed_routes(
        app,
        store,
        validator="5ValidatorHotkey",
        limiter=RateLimiter(rate_per_s=1.0, burst=6),
        clock=lambda: NOW,
    )
    running = serve_in_thread(app)
    yield running
    running.stop()


def test_feed_serves_proven_figures_and_uptime_and_nothing_an_attacker_could_use(
    server: RunningServer,
) -> None:
    reply = httpx.get(server.url + FEED_PATH, timeout=10)
    assert reply.status_code == 200 and reply.headers["cache-control"] == "no-store"
    for secret in SECRETS:  # no GPU UUIDs, failure reasons, internal addresses or host names
        assert secret not in reply.text
    assert "shared_with" not in reply.text and "reasons" not in reply.text
    feed = MachineFeed.model_validate_json(reply.content)
    assert feed.kind == "machine_feed.v1" and feed.validator == "5ValidatorHotkey"
    machines = {m.hotkey: m for m in feed.machines}
    one, two = machines["hk-one"], machines["hk-two"]
    assert (one.gpu_model, one.gpu_count, one.memory_gb, one.bandwidth_gbs) == (
        "NVIDIA H100 80GB HBM3",
        2,
        78.0,
        3100.0,
    )
    assert one.window(30).uptime == pytest.approx(23 / 30, abs=1e-4) and one.window(
        7
    ).uptime == pytest.approx(5 / 7, abs=1e-4)
    assert len(one.daily) == 30 and one.daily[-1] == [1, 1] and sum(t for t, _ in one.daily) == 30
    assert two.hosts_credited == 1 and two.first_proven_at == START + 36 * DAY
    assert machines["hk-three"].gpu_model is None and machines["hk-three"].window(30).uptime is None
    assert httpx.head(server.url + FEED_PATH, timeout=10).status_code == 200


def test_page_shows_every_machine_with_its_history(server: RunningServer) -> None:
    page = httpx.get(server.url + PAGE_PATH, timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert html.count("<tr data-uid=") == 4 and "<script" not in html
    assert "2× NVIDIA H100 80GB HBM3 · 1 host(s)" in html and "not proven" in html
    assert "77%" in html and "71%" in html  # 23 of 30 tests, 5 of 7
    for secret in SECRETS:
        assert secret not in html
    strip = re.search(r'<svg class="days" width="(\d+)".*?</svg>', html)
    assert strip is not None
    xs = [int(x) for x, _ in re.findall(r'<rect x="(\d+)" y="0" width="(\d+)"', strip.group(0))]
    assert len(xs) == 30 and max(xs) < int(strip.group(1))  # every day inside the drawn box


def test_a_reader_over_its_limit_gets_429_before_any_work(server: RunningServer) -> None:
    codes = [httpx.get(server.url + FEED_PATH, timeout=10).status_code for _ in range(10)]
    assert codes[:5] == [200] * 5 and 429 in codes  # a burst of 6 with HEAD above, then 1/s
    limited = httpx.get(server.url + FEED_PATH, timeout=10)
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


def test_the_feed_is_rebuilt_at_most_once_per_interval(tmp_path: Path) -> None:
    path = history_store(tmp_path / "v.db")
    app = FastAPI()
    add_feed_routes(app, path, limiter=RateLimiter(rate_per_s=100, burst=100), fresh_s=3600)
    running = serve_in_thread(app)
    try:
        first = httpx.get(running.url + FEED_PATH, timeout=10).json()
        store = ValidatorStore(path)
        store.sync_miners([(9, "hk-late")])
        store.close()
        assert httpx.get(running.url + FEED_PATH, timeout=10).json() == first  # served from memory
    finally:
        running.stop()


def test_limiter_forgets_the_oldest_address_beyond_its_cap() -> None:
    clock = Clock(0.0)
    limiter = RateLimiter(rate_per_s=1.0, burst=1, max_clients=3, clock=clock)
    assert [limiter.wait_s(a) for a in ("a", "b", "c", "a")] == [0.0, 0.0, 0.0, 1.0]
    limiter.wait_s("d")  # "b" is forgotten; "a" was seen last-but-two
    assert len(limiter._buckets) == 3 and "b" not in limiter._buckets
    clock.now += 1.0
    assert limiter.wait_s("a") == 0.0


def test_a_kept_reader_counts_new_and_open_rounds_like_a_fresh_read(tmp_path: Path) -> None:
    path = history_store(tmp_path / "v.db")
    reader = FeedReader(path)
    assert reader.read(NOW) == machine_history(path, now=NOW)
    store = ValidatorStore(path, clock=Clock(NOW - 60))
    rnd = store.begin_round(block=99_999)
    store.record_result(h100(rnd.round_id, 1, "hk-one", created=NOW - 60))  # an open round: counted
    assert reader.read(NOW) == machine_history(path, now=NOW)
    store.record_result(h100(rnd.round_id, 2, "hk-two", created=NOW - 30, ok=False, sample=0.0))
    store.finish_round(rnd.round_id, [ScoreUpdate(1, "hk-one", 1.0)])
    store.close()
    kept = reader.read(NOW)
    assert kept == machine_history(path, now=NOW)
    today = {m.hotkey: m.days[0] for m in kept.machines}
    assert today["hk-one"] == DayCount(2, 2, 0) and today["hk-two"] == DayCount(2, 1, 0)
    later = NOW + 5 * DAY  # the oldest days leave the window; nothing new was read
    assert reader.read(later) == machine_history(path, now=later)
