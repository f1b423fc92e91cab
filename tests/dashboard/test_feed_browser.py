"""The public machine feed page in a real headless Chromium, on the demo after its round.

``localnet --dashboard --hold -1`` keeps the dashboard (and the miners) up after the round; the
browser renders ``/machines`` and a screenshot is saved next to the dashboard's (its path is
printed; ``COMPUTE_TEST_ARTIFACTS`` picks the parent).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from demokit import stop_demo
from test_dashboard_browser import BROWSER, artifacts_dir, browser, dump_dom

from compute.dashboard.feed import MachineFeed

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.browser
def test_feed_page_renders_the_demos_machines_in_chromium(tmp_path: Path) -> None:
    if BROWSER is None:
        if os.environ.get("COMPUTE_REQUIRE_BROWSER") == "1":
            pytest.fail("no Chromium on PATH and COMPUTE_REQUIRE_BROWSER=1: run scripts/ci_browser.sh")
        pytest.skip("no Chromium: run scripts/ci_browser.sh")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "localnet.log"
    demo = subprocess.Popen(
        [sys.executable, "-m", "compute", "localnet", "--miners", "2", "--rounds", "1", "--hold", "-1"]
        + ["--workdir", str(tmp_path / "net"), "--dashboard", "--dashboard-port", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=log_path.open("w"),
    )
    try:
        deadline = time.monotonic() + 240
        while "holding for renters" not in log_path.read_text():
            assert demo.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(1)
        feed = MachineFeed.model_validate_json(httpx.get(url + "/api/public/v1/machines", timeout=10).content)
        assert len(feed.machines) == 2 and all(
            m.window(7) and m.window(7).uptime == 1.0 for m in feed.machines
        )
        html = dump_dom(url + "/machines", "<h1>Machines proven by this validator</h1>")
        assert html.count("<tr data-uid=") == 2 and "100%" in html and "<svg" in html
        shots = artifacts_dir()
        shot = browser(f"--screenshot={shots / 'machines.png'}", url + "/machines")
        assert shot.returncode == 0 and (shots / "machines.png").stat().st_size > 5_000, shot.stderr[-2000:]
        print(f"machine feed screenshot: {shots / 'machines.png'}")
        # register.py ranks from the same feed, believing it because the demo validator signed it
        net = tmp_path / "net"
        argv = [
            sys.executable,
            str(REPO / "neurons" / "register.py"),
            "--subtensor.network",
            f"sim:{net / 'chain.db'}",
        ]
        argv += ["--wallet.path", str(net / "wallets"), "--wallet.name", "validator"]
        argv += ["--register.data_dir", str(tmp_path / "book"), "resources", "--feed", url, "--json"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
        assert done.returncode == 0, done.stderr[-3000:]
        machines = json.loads(done.stdout)["machines"]
        assert len(machines) == 2 and all(
            m["verified"] and m["proven"]["uptime_30d"] == 1.0 for m in machines
        )
    finally:
        stop_demo(demo)
