"""The dashboard as a validator operator reads it, in a real headless Chromium at 1280 and 1920 px:
no page scrolls sideways, every page links to the others, and the miner page explains the score.

Screenshots of each page go to a test-artifacts directory (``COMPUTE_TEST_ARTIFACTS`` picks the
parent; the path is printed). ``COMPUTE_DOCS_SCREENSHOTS=1`` also writes the overview and the miner
page at 1280 px to ``docs/img/`` (what docs/dashboard.md shows).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
from cdp import BROWSER, Chromium
from demo_store import build_demo_store

from compute.dashboard import build_app
from compute.transport import serve_in_thread

REPO = Path(__file__).resolve().parents[2]
PAGES = {"/": "dashboard", "/miner/2": "miner", "/miner/3": "miner-rented", "/machines": "machines"}
DOCS = {("/", 1280): "dashboard-1280.png", ("/miner/2", 1280): "miner-1280.png"}


def artifacts() -> Path:
    parent = Path(os.environ.get("COMPUTE_TEST_ARTIFACTS", tempfile.gettempdir()))
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="dashboard-layout-", dir=parent))


@pytest.mark.slow
@pytest.mark.browser
def test_every_page_fits_1280_and_1920_px_and_links_the_others(tmp_path: Path) -> None:
    if BROWSER is None:
        if os.environ.get("COMPUTE_REQUIRE_BROWSER") == "1":
            pytest.fail("no Chromium on PATH and COMPUTE_REQUIRE_BROWSER=1: run scripts/ci_browser.sh")
        pytest.skip("no Chromium: run scripts/ci_browser.sh")
    store = build_demo_store(tmp_path / "validator.db", time.time())
    server = serve_in_thread(build_app(store))
    shots = artifacts()
    docs = os.environ.get("COMPUTE_DOCS_SCREENSHOTS") == "1"
    try:
        with Chromium() as browser:
            for width in (1280, 1920):
                for path, name in PAGES.items():
                    png = shots / f"{name}-{width}.png"
                    layout = browser.view(server.url + path, width, png=png)
                    assert layout["scrollWidth"] <= layout["clientWidth"] == width, (path, width, layout)
                    assert {"/", "/machines"} <= set(layout["links"]), path
                    if path == "/":
                        assert {f"/miner/{uid}" for uid in range(1, 6)} <= set(layout["links"])
                    if path == "/machines":
                        assert "/miner/2" in layout["links"]
                    if path.startswith("/miner/"):
                        assert "Why this score" in layout["text"] and "EMA step" in layout["text"]
                    if path == "/miner/3":
                        assert "rented" in layout["text"].split("Lease state now")[1].split("\n")[1]
                    if docs and (path, width) in DOCS:
                        (REPO / "docs" / "img" / DOCS[(path, width)]).write_bytes(png.read_bytes())
    finally:
        server.stop()
    print(f"dashboard screenshots: {shots}")
