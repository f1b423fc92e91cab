"""The dashboard app over real HTTP on 127.0.0.1: the page, the JSON views, read-only and escaped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from compute.dashboard import ProvenMachines, build_app
from compute.transport import RunningServer, serve_in_thread


@pytest.fixture
def server(filled_store: Path) -> Iterator[RunningServer]:
    running = serve_in_thread(build_app(filled_store))
    yield running
    running.stop()


def test_page_lists_every_miner_with_its_verdict_and_round_progress(server: RunningServer) -> None:
    page = httpx.get(server.url + "/", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert html.count('<tr id="uid-') == 3
    assert "Round 3 (running)" in html and "1/3 tested, 1 passed" in html
    assert "2× NVIDIA H100 80GB HBM3" in html and "rented" in html and "not tested" in html
    assert "<svg" in html and "Score (top miners)" in html and "Weight (top miners)" in html
    assert "<script" not in html  # a miner-controlled failure reason is escaped, never executed
    assert "&lt;script&gt;alert(1)&lt;/script&gt; mismatch" in html
    assert "9999" not in html  # the figure of a failed round is never shown as proven


def test_machines_endpoint_serves_what_the_validator_proved(server: RunningServer) -> None:
    body = ProvenMachines.model_validate(httpx.get(server.url + "/api/machines", timeout=10).json())
    machines = {m.hotkey: m for m in body.machines}
    assert set(machines) == {"hk-one", "hk-two"}
    assert machines["hk-two"].tflops_fp16 == 702.0 and machines["hk-two"].round_id == 1
    assert machines["hk-one"].gpu_model == "NVIDIA H100 80GB HBM3" and machines["hk-one"].gpu_count == 2
    assert machines["hk-one"].memory_gb == 78.0 and machines["hk-one"].bandwidth_gbs == 3100.0


def test_overview_json_and_read_only_methods(server: RunningServer) -> None:
    snap = httpx.get(server.url + "/api/overview", timeout=10).json()
    assert [m["uid"] for m in snap["miners"]] == [1, 2, 3]
    assert snap["round"]["tested"] == 1
    for method in ("POST", "PUT", "DELETE"):
        assert httpx.request(method, server.url + "/", timeout=10).status_code == 405


def test_missing_store_is_a_clear_503_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet.db"
    running = serve_in_thread(build_app(missing))
    try:
        reply = httpx.get(running.url + "/", timeout=10)
        assert reply.status_code == 503 and "does not exist" in reply.json()["detail"]
        assert httpx.get(running.url + "/api/machines", timeout=10).status_code == 503
        assert httpx.get(running.url + "/healthz", timeout=10).json() == {"status": "ok"}
    finally:
        running.stop()
    assert not missing.exists()


def test_bench_prints_the_first_render_figure_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from compute.lab.bench.dashboard import main

    assert main(["--miners", "4", "--days", "1", "--repeats", "1", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["miners"] == 4 and figures["pog_rows"] == 80 and figures["first_render_ms"] > 0


def test_a_multi_host_miner_shows_its_credited_hosts(tmp_path: Path) -> None:
    """Each host's credited sample reaches the page (hover) and /api/machines; 0 reads "not credited"."""
    from dashkit import NOW, Clock, h100

    from compute.store import ScoreUpdate, ValidatorStore

    store = ValidatorStore(tmp_path / "validator-27.db", clock=Clock(NOW))
    store.sync_miners([(1, "hk-multi")])
    rnd = store.begin_round(block=100)
    hosts = {"gpu-a": 1.25, "gpu-b": 0.0, "gpu-c": 0.75}  # gpu-b: the same device as gpu-a
    store.record_result(h100(rnd.round_id, 1, "hk-multi", gpu_count=4, hosts=hosts, created=NOW))
    store.finish_round(rnd.round_id, [ScoreUpdate(1, "hk-multi", 2.0)])
    store.close()
    running = serve_in_thread(build_app(tmp_path / "validator-27.db"))
    try:
        html = httpx.get(running.url + "/", timeout=10).text
        body = ProvenMachines.model_validate(httpx.get(running.url + "/api/machines", timeout=10).json())
    finally:
        running.stop()
    assert "4× NVIDIA H100 80GB HBM3" in html and "· 2 of 3 hosts" in html
    assert 'title="gpu-a: 1.25; gpu-b: not credited; gpu-c: 0.75"' in html
    assert body.machines[0].hosts == hosts


def test_each_miner_reads_its_reason_beside_pass_or_fail(server: RunningServer) -> None:
    """The reason is on the page next to the verdict, not only in a hover title."""
    html = httpx.get(server.url + "/", timeout=10).text
    shown = re.search(r'<span class="fail"[^>]*>fail</span> r\d+ <span class="why"[^>]*>([^<]*)</span>', html)
    assert shown is not None and shown.group(1) == "&lt;script&gt;alert(1)&lt;/script&gt; mismatch"
