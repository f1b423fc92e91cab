"""Every route of the dashboard, who may read it and what it returns.

The public routes are listed here with every field they return: a new route, or a new field on a
public route, fails ``test_every_unauthenticated_route_and_what_it_returns`` until it is added to
the list below (after asking whether a renter may know it and a cheater could not tune to it).
What the validator learnt about machines (device evidence, UUIDs, endpoints, timings, canary
signers) is served only at the private route, to requests signed by the validator's own hotkey.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import httpx
import pytest
from bittensor import http_auth
from dashkit import h100
from fastapi.routing import APIRoute

from compute.dashboard import build_app, serve_dashboard
from compute.dashboard.cli import main as dashboard_main
from compute.dashboard.private import PRIVATE_PATH
from compute.store import PresenceEntry, ScoreUpdate, ValidatorStore
from compute.transport import KeyWallet, serve_in_thread

UUID = "GPU-5f2c1e77-aaaa-bbbb-cccc-1234567890ab"
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL8+secretlookinghostkeybody"
CANARY = "5HGjWAeFDfFCWPsjFQdVV2Msvz2XtMktvgocEZcCj68kUMaw"
SHARED = f"shared device: same machine as uid 1 (gpu:{UUID}, hostkey:{HOST_KEY}, endpoint:203.0.113.7:40011); credited once, there"
EVIDENCE = (UUID, "203.0.113.7", "AAAAC3NzaC1lZDI1NTE5AAAAIL8", CANARY, "same machine as uid")
PRIVATE_FIELDS = ('"shared_with"', '"gpu_uuids"', '"timings"')

RESULT = (
    "availability", "block", "created", "credited_gpus", "depth_round", "gpu_count", "history_reset",
    "host", "hosts.*", "hotkey", "mem_gbs", "mem_proven_gb", "models[]", "ok", "reasons[]",
    "rental_uptime", "rented", "rented_fraction", "round_id", "sample", "scaling_efficiency",
    "sustained_factor", "sustained_ratio", "tflops_fp16", "tflops_fp32", "uid",
)  # fmt: skip
OVERVIEW = (
    "generated", "rounds_finished", "round.block", "round.finished", "round.miners", "round.passed",
    "round.round_id", "round.started", "round.tested", "score_history.*[][]", "weight_history.*[][]",
    "miners[].uid", "miners[].hotkey", "miners[].score", "miners[].weight",
    *(f"miners[].latest.{f}" for f in RESULT), *(f"miners[].verified.{f}" for f in RESULT),
)  # fmt: skip
MACHINES = (
    "kind", *(f"machines[].{f}" for f in (
        "hotkey", "uid", "gpu_model", "gpu_count", "tflops_fp16", "tflops_fp32", "memory_gb",
        "bandwidth_gbs", "verified_at", "round_id", "hosts.*",
    )),
)  # fmt: skip
FEED = (
    "kind", "validator", "generated_at", *(f"machines[].{f}" for f in (
        "uid", "hotkey", "gpu_model", "gpu_count", "tflops_fp16", "tflops_fp32", "memory_gb",
        "bandwidth_gbs", "hosts_credited", "first_proven_at", "last_proven_at", "last_passed_at",
        "windows[].days", "windows[].tests", "windows[].passed", "windows[].rented",
        "windows[].uptime", "daily[][]", "recent[].at", "recent[].verdict", "collateral",
        # the miner's signed price (None here: no probe heard one) and the latest look, with its time
        "price", "now.state", "now.source", "now.seen_at", "now.free_gpus",
    )),
)  # fmt: skip


def expand(paths: tuple[str, ...]) -> set[str]:
    """``paths`` with every container above them (``a[].b`` also gives ``a`` and ``a[]``)."""
    found: set[str] = set()
    for path in paths:
        for end in range(1, len(path) + 1):
            if end == len(path) or path[end] == "." or path[end : end + 2] == "[]":
                found.add(path[:end])
    return found


PUBLIC: dict[str, set[str] | str] = {
    "/": "html",
    "/api/overview": expand(OVERVIEW),
    "/api/machines": expand(MACHINES),
    "/api/public/v1/machines": expand(FEED),
    "/machines": "html",
    "/miner/{uid}": "html",
    "/healthz": {"status"},
}
URLS = {"/miner/{uid}": ("/miner/1", "/miner/2")}  # a route with a parameter: the pages asked for
LOCKSTEP = "absent: lockstep seat late by 0.412 s at 203.0.113.7:40011"  # a presence verdict's reason
PRIVATE = {PRIVATE_PATH}
DATA_KEYED = ("score_history", "weight_history", "hosts")  # mappings keyed by data (uids, host names)


def shape(value: Any, path: str = "") -> set[str]:
    """Every key path of a JSON value (``a.b``, ``list[]``; data-keyed mappings as ``*``)."""
    paths: set[str] = {path} if path else set()
    if isinstance(value, dict):
        keyed = path.split(".")[-1].rstrip("[]") in DATA_KEYED
        for key, item in value.items():
            name = "*" if keyed else key
            paths |= shape(item, f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        for item in value:
            paths |= shape(item, f"{path}[]")
        paths.add(f"{path}[]")
    return paths


@pytest.fixture
def revealing_store(tmp_path: Path) -> Path:
    """Results carrying every kind of evidence a validator keeps about machines."""
    store = ValidatorStore(tmp_path / "validator-27.db")
    store.sync_miners([(1, "hk-one"), (2, "hk-two")])
    rnd = store.begin_round(block=10)
    store.record_result(
        h100(rnd.round_id, 1, "hk-one", gpu_uuids=(UUID,), hosts={"rack-a": 1.0}, timings={"gemm_s": 1.5})
    )
    reasons = (SHARED, f"canary refused: signer {CANARY} not served", "ssh to 10.1.2.3:40022 refused")
    store.record_result(
        h100(
            rnd.round_id,
            2,
            "hk-two",
            ok=False,
            sample=0.0,
            reasons=reasons,
            gpu_uuids=(UUID,),
            shared_with=(1,),
        )
    )
    store.finish_round(rnd.round_id, [ScoreUpdate(1, "hk-one", 0.5), ScoreUpdate(2, "hk-two", 0.0)])
    store.log_weights(10, {1: 1.0}, 1, True)
    store.record_presence("presence", [PresenceEntry(1, "hk-one", 0.0, LOCKSTEP)])
    store.close()
    return tmp_path / "validator-27.db"


def _signed(wallet: Any, receiver: str) -> dict[str, str]:
    return http_auth.sign(
        KeyWallet.from_wallet(wallet), method="GET", path=PRIVATE_PATH, receiver_ss58=receiver
    )


def test_every_unauthenticated_route_and_what_it_returns(revealing_store: Path, make_wallet) -> None:
    validator = make_wallet("vali").hotkey
    app = build_app(revealing_store, full=True, keypair=validator)
    routes = {route.path for route in app.routes if isinstance(route, APIRoute)}
    assert routes == set(PUBLIC) | PRIVATE, "a route was added or removed: list it here, public or not"
    server = serve_in_thread(app, "127.0.0.1", 0)
    try:
        for route, expected in PUBLIC.items():
            for path in URLS.get(route, (route,)):
                answer = httpx.get(f"{server.url}{path}", timeout=10)
                assert answer.status_code == 200, (path, answer.text)
                leaked = [s for s in (*EVIDENCE, *PRIVATE_FIELDS, "lockstep", "0.412") if s in answer.text]
                assert leaked == [], f"public {path} shows {leaked}"
                if expected == "html":
                    assert answer.headers["content-type"].startswith("text/html")
                else:
                    assert shape(answer.json()) == expected, path
        overview = httpx.get(f"{server.url}/api/overview", timeout=10).json()
        shown = [m["latest"]["reasons"] for m in overview["miners"] if m["uid"] == 2][0]
        assert shown == [  # the verdicts stay, the evidence and identities go
            "shared device: credited once, on another miner",
            "canary refused: signer <hotkey> not served",
            "ssh to <address> refused",
        ]
        for path in PRIVATE:
            assert httpx.get(f"{server.url}{path}", timeout=10).status_code == 401
    finally:
        server.stop()


def test_the_private_view_needs_the_validators_own_signature(revealing_store: Path, make_wallet) -> None:
    validator, other = make_wallet("vali"), make_wallet("someone")
    app = build_app(revealing_store, full=True, keypair=validator.hotkey)
    server = serve_in_thread(app, "127.0.0.1", 0)
    url = f"{server.url}{PRIVATE_PATH}"
    vali = validator.hotkey.ss58_address
    try:
        assert httpx.get(url, timeout=10).status_code == 401  # unsigned
        assert httpx.get(url, headers=_signed(other, vali), timeout=10).status_code == 403  # another hotkey
        assert httpx.get(url, headers=_signed(validator, "5" + "C" * 47), timeout=10).status_code == 401
        headers = _signed(validator, vali)
        answer = httpx.get(url, headers=headers, timeout=10)
        assert answer.status_code == 200
        miners = {m["uid"]: m for m in answer.json()["miners"]}
        assert miners[2]["latest"]["shared_with"] == [1] and miners[1]["latest"]["gpu_uuids"] == [UUID]
        assert SHARED in miners[2]["latest"]["reasons"]
        assert httpx.get(url, headers=headers, timeout=10).status_code == 401  # replayed
        assert httpx.head(url, headers=_signed(validator, vali), timeout=10).status_code == 405
        out = io.StringIO()  # the operator's reader: python -m compute dashboard --private URL
        flags = ["--wallet.name", "vali", "--wallet.path", str(revealing_store.parent / "wallets")]
        with redirect_stdout(out):
            assert dashboard_main(["--private", server.url, *flags]) == 0
        assert json.loads(out.getvalue())["miners"][1]["latest"]["shared_with"] == [1]
        other_flags = ["--wallet.name", "someone", "--wallet.path", str(revealing_store.parent / "wallets")]
        assert dashboard_main(["--private", server.url, *other_flags]) == 1
    finally:
        server.stop()


def test_no_private_view_without_the_flag_or_without_the_validators_key(
    revealing_store: Path, make_wallet
) -> None:
    validator = make_wallet("vali")
    plain = build_app(revealing_store, keypair=validator.hotkey)
    assert PRIVATE_PATH not in {r.path for r in plain.routes if isinstance(r, APIRoute)}
    with pytest.raises(ValueError, match="validator's hotkey"):
        build_app(revealing_store, full=True)
    assert dashboard_main(["--store", str(revealing_store), "--dashboard.full"]) == 2
    assert dashboard_main(["--private", "http://127.0.0.1:1"]) == 2


def test_a_dashboard_accepts_connections_from_the_moment_it_is_started(revealing_store: Path) -> None:
    """No await between start and connect: the socket must already listen (it was bound but not
    listening until uvicorn got to it, so a reader told "ready" could be refused)."""

    async def go() -> None:
        stop = asyncio.Event()
        dashboard = serve_dashboard(revealing_store, "127.0.0.1", _free_port(), stop)
        host, port = dashboard.url.split("//")[1].rstrip("/").split(":")
        with socket.create_connection((host, int(port)), timeout=5):
            pass  # accepted into the backlog, not refused
        assert await dashboard.listening(10)
        async with httpx.AsyncClient() as client:  # one try: listening means answering
            assert (await client.get(f"{dashboard.url}healthz", timeout=10)).status_code == 200
        stop.set()
        await asyncio.wait_for(dashboard.task, 10)
        assert not await dashboard.listening(1)

    asyncio.run(go())


@pytest.mark.slow
def test_the_dashboard_process_is_ready_only_once_it_answers(revealing_store: Path) -> None:
    from compute.dashboard import DashboardOptions, start_dashboard

    async def go() -> None:
        process = start_dashboard(DashboardOptions(revealing_store, "127.0.0.1", _free_port()))
        try:
            url = await process.ready(60)
            assert url
            with httpx.Client() as client:  # at once, one try
                assert client.get(f"{url}healthz", timeout=10).status_code == 200
        finally:
            await process.close()

    asyncio.run(go())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
