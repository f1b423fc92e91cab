"""The worked example in docs/identification-and-scoring.md is what the dashboard's miner page
shows for the demo miner uid 2: the page is rendered from the demo store and its terms table and
one-line explanation are compared with the document's."""

from __future__ import annotations

import html
import re
from pathlib import Path

import httpx
from dashkit import NOW
from demo_store import build_demo_store

from compute.dashboard.live import miner_detail
from compute.dashboard.miner_page import explain_latest, render_miner_page
from compute.scoring import load_gpu_table, load_holistic_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "identification-and-scoring.md"


def documented() -> tuple[list[tuple[str, str]], str]:
    block = DOC.read_text(encoding="utf-8").split("<!-- worked-example:start -->")[1]
    block = block.split("<!-- worked-example:end -->")[0]
    rows = [
        (cells[0].strip(), cells[1].strip())
        for line in block.splitlines()
        if line.startswith("| ") and not line.startswith("| term")
        for cells in [line.strip("|").split(" | ", 1)]
    ]
    line = block.split("```")[1].strip()
    return rows, line


def shown(page: str) -> tuple[list[tuple[str, str]], str]:
    terms = re.search(r'<table class="terms" id="terms">(.*?)</table>', page)
    line = re.search(r'<code class="line" id="explained">(.*?)</code>', page)
    assert terms and line
    rows = re.findall(r"<tr><td>(.*?)<td[^>]*>(.*?)</tr>", terms.group(1))
    return [(html.unescape(a), html.unescape(b)) for a, b in rows], html.unescape(line.group(1))


def test_the_documented_worked_example_is_what_the_miner_page_shows(tmp_path: Path) -> None:
    store = build_demo_store(tmp_path / "validator.db", NOW)
    detail = miner_detail(store, 2, now=NOW)
    assert detail is not None
    page = render_miner_page(detail, explain_latest(detail, load_gpu_table(), load_holistic_config()))
    assert shown(page) == documented()


def test_the_served_page_shows_the_same(tmp_path: Path) -> None:
    from compute.dashboard import build_app
    from compute.transport import serve_in_thread

    server = serve_in_thread(build_app(build_demo_store(tmp_path / "validator.db", NOW)))
    try:
        page = httpx.get(server.url + "/miner/2", timeout=10).text
    finally:
        server.stop()
    assert shown(page) == documented()
