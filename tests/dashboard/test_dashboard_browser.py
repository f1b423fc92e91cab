"""The dashboard in a real headless Chromium, on a running demo (``localnet --dashboard``).

Loads the page while the validator runs, checks what the browser rendered, saves a screenshot in
a test-artifacts directory (its path is printed; ``COMPUTE_TEST_ARTIFACTS`` picks the parent) and
checks the demo keeps serving the dashboard after its rounds until interrupted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def browser(*args: str) -> subprocess.CompletedProcess[str]:
    assert BROWSER is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,900"]
    return subprocess.run([BROWSER, *flags, *args], capture_output=True, text=True, timeout=120)


def dump_dom(url: str, heading: str, attempts: int = 3) -> str:
    """The DOM Chromium rendered for ``url``, once it holds ``heading``. On a loaded CI machine one
    ``--dump-dom`` exited 0 with nothing on stdout (the page never reached the dump); that is the
    browser's miss, so it is asked again, and a page that never renders still fails, with every
    attempt's stderr."""
    misses = []
    for _ in range(attempts):
        dom = browser("--dump-dom", url)
        if dom.returncode == 0 and heading in dom.stdout:
            return dom.stdout
        misses.append(f"rc={dom.returncode} stdout={dom.stdout[:300]!r} stderr={dom.stderr[-1000:]!r}")
        time.sleep(2)
    raise AssertionError(f"{heading!r} never rendered at {url}:\n" + "\n".join(misses))


def wait_for_round(url: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            snap = httpx.get(url + "api/overview", timeout=5).json()
            if snap.get("round") and snap["round"]["tested"] >= 1:
                return snap
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(1)
    raise AssertionError(f"no tested miner on {url} within {timeout_s}s")


def artifacts_dir() -> Path:
    parent = Path(os.environ.get("COMPUTE_TEST_ARTIFACTS", tempfile.gettempdir()))
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="dashboard-", dir=parent))


@pytest.mark.browser
def test_dashboard_renders_a_running_demo_in_chromium(tmp_path: Path) -> None:
    if BROWSER is None:
        if os.environ.get("COMPUTE_REQUIRE_BROWSER") == "1":
            pytest.fail("no Chromium on PATH and COMPUTE_REQUIRE_BROWSER=1: run scripts/ci_browser.sh")
        pytest.skip("no Chromium: run scripts/ci_browser.sh")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    log = (tmp_path / "localnet.log").open("w")
    demo = subprocess.Popen(
        [sys.executable, "-m", "compute", "localnet", "--miners", "2", "--rounds", "2", "--json"]
        + ["--workdir", str(tmp_path / "net"), "--dashboard", "--dashboard-port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        wait_for_round(url, 200)
        html = dump_dom(url, "<h1>Validator dashboard</h1>")
        assert 'id="miner-count">2<' in html and html.count('<tr id="uid-') == 2
        assert "pass" in html and "CPU" in html and "<svg" in html
        uid = httpx.get(url + "api/overview", timeout=10).json()["miners"][0]["uid"]
        page = dump_dom(f"{url}miner/{uid}", "Why this score")  # a demo miner's sample, term by term
        assert 'id="explained"' in page and f"uid {uid} r" in page and f'href="/machines#uid-{uid}"' in page
        shots = artifacts_dir()
        shot = browser(f"--screenshot={shots / 'dashboard.png'}", url)
        assert shot.returncode == 0 and (shots / "dashboard.png").stat().st_size > 10_000, shot.stderr[-2000:]
        print(f"dashboard screenshot: {shots / 'dashboard.png'}")
        # After its rounds the demo prints its summary and keeps the dashboard up until Ctrl-C.
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline and "still serving" not in (tmp_path / "localnet.log").read_text():
            assert demo.poll() is None, (tmp_path / "localnet.log").read_text()[-3000:]
            time.sleep(1)
        final = httpx.get(url + "api/overview", timeout=10).json()
        assert final["rounds_finished"] == 2
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=30) == 0
        assert demo.stdout is not None
        assert json.loads(demo.stdout.read())["rounds"] == 2
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        log.close()
