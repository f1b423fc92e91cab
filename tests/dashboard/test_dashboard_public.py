"""What anyone who reaches a validator's dashboard may see, and HEAD."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from dashkit import h100

from compute.dashboard import build_app, public_reason
from compute.store import ValidatorStore
from compute.transport import serve_in_thread

UUID = "GPU-5f2c1e77-aaaa-bbbb-cccc-1234567890ab"
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL8+secretlookinghostkeybody"
SHARED = f"shared device: same machine as uid 1 (gpu:{UUID}, hostkey:{HOST_KEY}, endpoint:203.0.113.7:40011); credited once, there"
SECRETS = (
    UUID,
    "203.0.113.7",
    "40011",
    "AAAAC3NzaC1lZDI1NTE5AAAAIL8",
    "10.1.2.3:40022",
    "lease-host.example.org",
)


@pytest.fixture
def revealing_store(tmp_path: Path) -> Path:
    store = ValidatorStore(tmp_path / "validator-27.db")
    store.sync_miners([(1, "hk-one"), (2, "hk-two"), (3, "hk-three")])
    rnd = store.begin_round(block=10)
    store.record_result(h100(rnd.round_id, 1, "hk-one", gpu_uuids=(UUID,)))
    store.record_result(
        h100(rnd.round_id, 2, "hk-two", ok=False, sample=0.0, reasons=(SHARED,), gpu_uuids=(UUID,))
    )
    reasons = ("ssh connect to 10.1.2.3:40022 failed: refused", "lease on lease-host.example.org went away")
    store.record_result(h100(rnd.round_id, 3, "hk-three", ok=False, sample=0.0, reasons=reasons))
    store.finish_round(rnd.round_id, [])
    store.close()
    return tmp_path / "validator-27.db"


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        (SHARED, "shared device: credited once, on another miner"),
        ("canary 5HGjWAeFDfFCWPsjFQdVV2Msvz2XtMktvgocEZcCj68kUMaw refused", "canary <hotkey> refused"),
        ("ssh connect to 10.1.2.3:40022 failed: refused", "ssh connect to <address> failed: refused"),
        ("ssh connect to [2001:db8::5]:40022 failed", "ssh connect to <address> failed"),
        (f"host key {HOST_KEY} changed", "host key <host key> changed"),
        ("memory proof: 0.8 GB/s below the 64 GB/s floor", "memory proof: 0.8 GB/s below the 64 GB/s floor"),
    ],
)
def test_public_reason_keeps_the_verdict_and_drops_identifiers(reason: str, shown: str) -> None:
    assert public_reason(reason) == shown


def test_public_dashboard_shows_no_device_identifiers_or_endpoints(
    revealing_store: Path, make_wallet
) -> None:
    """Also with ``--dashboard.full``: the operator's view is the private route, never the page."""
    public = serve_in_thread(build_app(revealing_store), "127.0.0.1", 0)
    full = serve_in_thread(
        build_app(revealing_store, full=True, keypair=make_wallet("v").hotkey), "127.0.0.1", 0
    )
    try:
        for server in (public, full):
            for path in ("/", "/api/overview", "/api/machines"):
                text = httpx.get(f"{server.url}{path}", timeout=10).text
                leaked = [s for s in (*SECRETS, "same machine as uid") if s in text]
                assert leaked == [], f"public {path} shows {leaked}"
            page = httpx.get(f"{server.url}/api/overview", timeout=10).text
            assert "shared device: credited once" in page and "<address>" in page  # the verdicts stay
    finally:
        public.stop()
        full.stop()


def test_head_answers_like_get(revealing_store: Path) -> None:
    running = serve_in_thread(build_app(revealing_store), "127.0.0.1", 0)
    try:
        for path in ("/", "/api/overview", "/api/machines", "/healthz"):
            head = httpx.head(f"{running.url}{path}", timeout=10)
            assert head.status_code == 200 and head.content == b"", path
            assert (
                head.headers["content-type"]
                == httpx.get(f"{running.url}{path}", timeout=10).headers["content-type"]
            )
    finally:
        running.stop()
