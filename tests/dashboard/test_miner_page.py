"""The miner page and the overview over real HTTP, on the demo store (``demo_store``): each miner's
sample explained, its lease state now (the newest sighting, not the last round), stale data marked
with its age, and links between the overview, the miner pages and ``/machines``."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator

import httpx
import pytest
from demo_store import build_demo_store

from compute.dashboard import build_app
from compute.dashboard.live import Sighting, lease_state
from compute.store import PogResult
from compute.transport import RunningServer, serve_in_thread


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    store = build_demo_store(tmp_path_factory.mktemp("demo") / "validator.db", time.time())
    running = serve_in_thread(build_app(store))
    yield running
    running.stop()


def text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def row(page: str, uid: int) -> str:
    found = re.search(rf'<tr id="uid-{uid}">(.*?)</tr>', page)
    assert found, uid
    return " ".join(text(found.group(1)).split())


def test_miner_page_explains_the_throttled_miner(demo: RunningServer) -> None:
    page = httpx.get(demo.url + "/miner/2", timeout=10).text
    shown = " ".join(text(page).split())
    for part in (
        "per GPU 2.97 as H100 SXM × 2 GPU(s)",
        "sustained factor ×0.85",
        "host factor ×1.08",
        "score 5.946 → 5.804 (α 0.3: 0.3×5.473 + 0.7×5.946)",
        "presence share ×0.75",
        "credit 4.353",
        "collateral factor applied when weights are set",
    ):
        assert part in shown, part
    assert 'href="/machines#uid-2"' in page and 'href="/"' in page


def test_the_faster_miner_that_refused_canaries_shows_why_it_earns_less(demo: RunningServer) -> None:
    shown = " ".join(text(httpx.get(demo.url + "/miner/1", timeout=10).text).split())
    assert "per GPU 3.3 as H100 SXM" in shown and "availability ×0.5" in shown and "credit 3.577" in shown


def test_zero_reasons_and_stale_data_are_on_the_page(demo: RunningServer) -> None:
    failed = " ".join(text(httpx.get(demo.url + "/miner/4", timeout=10).text).split())
    assert "zero because fp16 product mismatch at row 1873" in failed
    gone = httpx.get(demo.url + "/miner/5", timeout=10).text
    assert "Not tested since round 1" in gone and "stale" in gone
    assert "credit 0: absent at every presence check" in html.unescape(gone)
    assert httpx.get(demo.url + "/miner/77", timeout=10).status_code == 404
    assert httpx.get(demo.url + "/miner/-1", timeout=10).status_code == 422


def test_overview_shows_the_lease_state_now_and_links_every_page(demo: RunningServer) -> None:
    page = httpx.get(demo.url + "/", timeout=10).text
    assert "rented presence check" in row(page, 3)  # the round saw it partly rented, the newer check rented
    assert "available" not in page
    assert "stale" in row(page, 5) and "stale" not in row(page, 2)
    for uid in range(1, 6):
        assert f'href="/miner/{uid}"' in page
    assert 'href="/machines"' in page
    machines = httpx.get(demo.url + "/machines", timeout=10).text
    assert 'href="/miner/2"' in machines and 'href="/"' in machines and "stale" in machines


def result(**extra) -> PogResult:
    return PogResult(3, 1, "hk", **{"ok": True, "sample": 1.0, "created": 100.0, **extra})


@pytest.mark.parametrize(
    ("latest", "seen", "label", "source"),
    [
        (None, None, "not tested", ""),
        (result(), None, "free", "round 3"),
        (result(rented=True, rented_fraction=1.0), None, "rented", "round 3"),
        (result(rented_fraction=0.5), None, "partly rented", "round 3"),
        (result(ok=False, sample=0.0), None, "failed", "round 3"),
        (result(), Sighting(200.0, 1.0, True), "rented", "presence check"),  # leased since the round
        (result(), Sighting(200.0, 0.5, True), "partly rented", "presence check"),
        (result(), Sighting(200.0, 0.0, False), "absent", "presence check"),
        (result(rented=True), Sighting(50.0, 1.0, False), "rented", "round 3"),  # the round is newer
    ],
)
def test_lease_state_is_the_newest_sighting(
    latest: PogResult | None, seen: Sighting | None, label: str, source: str
) -> None:
    state = lease_state(latest, seen)
    assert (state.label, state.source) == (label, source)
