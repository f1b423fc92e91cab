"""``register.py resources`` shows what a validator *proved*, read from its dashboard or store.

A real subnet (miner processes on 127.0.0.1), a real validator store written through its API, the
real dashboard app over HTTP. The miner claims one thing; only the validator's figures are shown.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from operator_helpers import GPU_NAME

from compute.chain import SimChainState
from compute.dashboard import build_app
from compute.operator import EXIT_OK, EXIT_USAGE, main
from compute.store import PogResult, ValidatorStore
from compute.transport import RunningServer, serve_in_thread

PROVEN = "NVIDIA A100 80GB PCIe"


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def write_store(path: Path, hotkey: str, uid: int) -> Path:
    """Round 1 proves an A100 with measured figures; round 2 fails while claiming far more."""
    store = ValidatorStore(path)
    first = store.begin_round(1).round_id
    store.record_result(
        PogResult(
            first, uid, hotkey, ok=True, sample=1.0, models=(PROVEN,), gpu_count=1, tflops_fp16=250.0,
            tflops_fp32=19.5, mem_proven_gb=79.0, mem_gbs=1800.0, created=time.time() - 3600,
        )
    )  # fmt: skip
    store.finish_round(first, [])
    second = store.begin_round(2).round_id
    store.record_result(
        PogResult(
            second, uid, hotkey, ok=False, sample=0.0, models=(GPU_NAME,), gpu_count=8, tflops_fp16=9999.0,
            reasons=("proof did not verify",),
        )
    )  # fmt: skip
    store.close()
    return path


def validator_key(subnet, make_wallet, name: str = "dash_validator", permit: bool = True):
    """A hotkey registered on the subnet's chain (with a validator permit unless told otherwise)."""
    wallet = make_wallet(name)
    state = SimChainState.open(subnet.chain_path)
    state.register(
        wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0 if permit else 1.0, permit
    )
    return wallet.hotkey


@pytest.fixture
def dashboard(subnet, tmp_path: Path, make_wallet) -> Iterator[RunningServer]:
    store = write_store(tmp_path / "validator-27.db", subnet.miner_hotkey, subnet.miner_uid)
    server = serve_in_thread(build_app(store, keypair=validator_key(subnet, make_wallet)))
    yield server
    server.stop()


def test_resources_shows_the_validators_proven_figures_not_the_miners_claim(subnet, dashboard) -> None:
    code, body = subnet.cli("operator_a", "--register.dashboard", dashboard.url, "resources")
    assert code == EXIT_OK
    machine = next(m for m in body["machines"] if m["hotkey"] == subnet.miner_hotkey)
    assert machine["verified"] is True and machine["gpu_model"] == PROVEN and machine["gpu_count"] == 1
    proven = machine["proven"]
    assert (proven["tflops_fp16"], proven["tflops_fp32"], proven["memory_gb"], proven["bandwidth_gbs"]) == (
        250.0,
        19.5,
        79.0,
        1800.0,
    )
    assert time.time() - 3700 < proven["verified_at"] < time.time() - 3500
    others = [m for m in body["machines"] if m["hotkey"] != subnet.miner_hotkey]
    assert others and all(m["proven"] is None and m["verified"] is False for m in others)


def test_resources_table_has_proven_columns(subnet, dashboard) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        [*subnet.flags("operator_a"), "--register.dashboard", dashboard.url, "resources"],
        stdout=out,
        stderr=err,
    )
    text = out.getvalue()
    assert code == EXIT_OK, err.getvalue()
    assert "Proven TFLOPS fp16/fp32" in text and "250 / 19.5" in text and "79 GB" in text
    assert "1.8e+03 GB/s" in text and "1h 00m ago" in text
    assert "9999" not in text  # the failed round's claim is never shown


def test_the_store_file_gives_the_same_figures_as_the_dashboard(subnet, tmp_path: Path) -> None:
    store = write_store(tmp_path / "v" / "validator-27.db", subnet.miner_hotkey, subnet.miner_uid)
    code, body = subnet.cli("operator_a", "--register.pog_db", str(store), "resources")
    assert code == EXIT_OK
    machine = next(m for m in body["machines"] if m["hotkey"] == subnet.miner_hotkey)
    assert machine["proven"]["tflops_fp16"] == 250.0 and machine["proven"]["memory_gb"] == 79.0


def test_an_unusable_dashboard_is_a_clear_usage_error(subnet, tmp_path: Path) -> None:
    code, body = subnet.cli("operator_a", "--register.dashboard", "ftp://x", "resources")
    assert code == EXIT_USAGE and "http(s) URL" in body["error"]["message"]
    missing = serve_in_thread(build_app(tmp_path / "nothing.db"))  # answers 503: store not there
    try:
        code, body = subnet.cli("operator_a", "--register.dashboard", missing.url, "resources")
    finally:
        missing.stop()
    assert code == EXIT_USAGE and "answered 503" in body["error"]["message"]
