"""A headless Chromium driven over the DevTools protocol (``websockets``, no driver to install):
load a page at a given window width, read what the browser laid out (the document's scroll width,
its links, an element's text) and take a PNG of the viewport.

For the dashboard's browser checks; ``BROWSER`` is None where Chromium is missing
(``scripts/ci_browser.sh`` installs it).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
LAYOUT = """JSON.stringify({
  scrollWidth: document.documentElement.scrollWidth,
  clientWidth: document.documentElement.clientWidth,
  links: [...document.querySelectorAll('a')].map(a => a.getAttribute('href')),
  text: document.body.innerText,
})"""


class Chromium:
    """One headless Chromium for a test (``with Chromium() as browser: browser.view(url, 1280)``)."""

    def __init__(self) -> None:
        assert BROWSER is not None
        self._profile = tempfile.TemporaryDirectory(prefix="cdp-")
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> Chromium:
        args = [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--remote-debugging-port=0",
            f"--user-data-dir={self._profile.name}",
            "about:blank",
        ]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        active = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not active.is_file() or not active.read_text().strip():
            if time.monotonic() > deadline or self._process.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        self.port = int(active.read_text().split()[0])
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._profile.cleanup()

    def view(self, url: str, width: int, height: int = 900, png: Path | None = None) -> dict[str, Any]:
        """Load ``url`` in a ``width`` x ``height`` window; its layout (``LAYOUT``) and, with
        ``png``, a screenshot of the viewport written there."""
        target = httpx.put(f"http://127.0.0.1:{self.port}/json/new?about:blank", timeout=10).json()
        try:
            return asyncio.run(_view(target["webSocketDebuggerUrl"], url, width, height, png))
        finally:
            httpx.get(f"http://127.0.0.1:{self.port}/json/close/{target['id']}", timeout=10)


async def _view(ws_url: str, url: str, width: int, height: int, png: Path | None) -> dict[str, Any]:
    ids = itertools.count(1)
    async with websockets.connect(ws_url, max_size=64 * 2**20) as ws:

        async def call(method: str, **params: Any) -> dict[str, Any]:
            sent = next(ids)
            await ws.send(json.dumps({"id": sent, "method": method, "params": params}))
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if message.get("id") == sent:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return message.get("result", {})

        await call("Page.enable")
        await call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        await call("Page.navigate", url=url)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = await call("Runtime.evaluate", expression="document.readyState", returnByValue=True)
            if state["result"].get("value") == "complete":
                break
            await asyncio.sleep(0.1)
        layout = await call("Runtime.evaluate", expression=LAYOUT, returnByValue=True)
        if png is not None:
            shot = await call("Page.captureScreenshot", format="png")
            png.parent.mkdir(parents=True, exist_ok=True)
            png.write_bytes(base64.b64decode(shot["data"]))
        return json.loads(layout["result"]["value"])


__all__ = ["BROWSER", "Chromium"]
