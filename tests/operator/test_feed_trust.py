"""``register.py resources|allocate --feed URL``: ranking from a validator's signed machine feed.

Against the real register.py on the operator tests' subnet and real dashboards on 127.0.0.1: the
feed's figures and uptime are used only when a validator holding a stated share of the stake (or
the pinned one) signed them for this request and the feed names that same validator; an unsigned
feed, one signed by a miner (with or without a permit) or another validator, one that names another
validator, an edited or replayed one, and one that drips or floods are each refused with a clear
error within the deadline.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response
from operator_helpers import run_measured
from test_dashboard_trust import REPO, hostile  # noqa: F401 - the hostile servers fixture
from test_resources_proven import PROVEN, validator_key

from compute.chain import SimChainState
from compute.dashboard import build_app
from compute.dashboard.feed_routes import FEED_PATH, add_feed_routes, signed_bytes
from compute.operator import EXIT_OK, EXIT_USAGE, Machine, VerifiedGpus, Wanted, rank
from compute.store import PogResult, ValidatorStore
from compute.transport import RunningServer, serve_in_thread

DAY = 86_400.0


def feed_store(path: Path, hotkey: str, uid: int, days: int = 10, failed: tuple[int, ...] = (2,)) -> Path:
    """One test a day for ``days`` days (the newest an hour ago); the days in ``failed`` failed."""
    store = ValidatorStore(path)
    store.sync_miners([(uid, hotkey)])
    now = time.time()
    for day in range(days):
        created = now - 3600 - (days - 1 - day) * DAY
        rnd = store.begin_round(block=day + 1).round_id
        ok = day not in failed
        figures = dict(models=(PROVEN,), gpu_count=1, tflops_fp16=250.0, tflops_fp32=19.5, mem_proven_gb=79.0)
        store.record_result(
            PogResult(rnd, uid, hotkey, ok=ok, sample=1.0 if ok else 0.0, created=created, **figures)  # type: ignore[arg-type]
        )
        store.finish_round(rnd, [])
    store.close()
    return path


@pytest.fixture
def store(subnet, tmp_path: Path) -> Path:
    return feed_store(tmp_path / "validator-27.db", subnet.miner_hotkey, subnet.miner_uid)


def cli(subnet, *args: str) -> tuple[int, dict]:
    return subnet.cli("operator_a", *args)


def test_signed_feed_marks_ranks_and_shows_uptime(subnet, store: Path, make_wallet) -> None:
    key = validator_key(subnet, make_wallet)
    server = serve_in_thread(build_app(store, keypair=key))
    try:
        code, body = cli(
            subnet, "resources", "--feed", server.url, "--register.dashboard_hotkey", key.ss58_address
        )
        assert code == EXIT_OK, body
        machine = next(m for m in body["machines"] if m["hotkey"] == subnet.miner_hotkey)
        assert machine["verified"] is True and machine["gpu_model"] == PROVEN
        proven = machine["proven"]
        assert proven["uptime_30d"] == pytest.approx(0.9) and proven["uptime_7d"] == pytest.approx(1.0)
        assert proven["tflops_fp16"] == 250.0 and proven["first_proven_at"] < time.time() - 9 * DAY
        code, body = cli(subnet, "allocate", "--feed", server.url + FEED_PATH, "--ttl", "10m")
        assert code == EXIT_OK and body["lease"]["verified"] is True, body
        assert cli(subnet, "deallocate", body["lease"]["lease_id"])[0] == EXIT_OK
    finally:
        server.stop()


@pytest.mark.parametrize("who", ["nobody", "miner", "other validator"])
def test_a_feed_not_signed_by_a_trusted_validator_is_refused(subnet, store: Path, make_wallet, who) -> None:
    key = None
    if who == "miner":  # a registered hotkey without a validator permit (say, the miner itself)
        key = validator_key(subnet, make_wallet, "sneaky_miner", permit=False)
    elif who == "other validator":
        key = validator_key(subnet, make_wallet, "other_validator")
    pinned = validator_key(subnet, make_wallet, "trusted_validator").ss58_address
    server = serve_in_thread(build_app(store, keypair=key))
    try:
        extra = ("--register.dashboard_hotkey", pinned) if who == "other validator" else ()
        code, body = cli(subnet, *extra, "resources", "--feed", server.url)
    finally:
        server.stop()
    assert code == EXIT_USAGE, body
    assert "figures are not used" in body["error"]["message"]


def test_a_feed_signed_by_a_permit_holder_with_little_stake_is_refused(
    subnet, store: Path, make_wallet
) -> None:
    """A miner holding a validator permit (stake 10 of the subnet's 2,010) publishes its own figures:
    a permit alone is not enough; the signer must hold the stated share of the validator stake
    (--register.signer_share, 5 % by default) or be the pinned hotkey."""
    wallet = make_wallet("permitted_miner")
    SimChainState.open(subnet.chain_path).register(
        wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 10.0, True
    )
    server = serve_in_thread(build_app(store, keypair=wallet.hotkey))
    try:
        code, body = cli(subnet, "resources", "--feed", server.url)
        assert code == EXIT_USAGE and "figures are not used" in body["error"]["message"], body
        code, body = cli(subnet, "resources", "--feed", server.url, "--register.signer_share", "0.004")
        assert code == EXIT_OK, body  # the renter states a share this signer holds: its choice
        pinned = ("--register.dashboard_hotkey", wallet.hotkey.ss58_address)
        assert cli(subnet, *pinned, "resources", "--feed", server.url)[0] == EXIT_OK  # pinned: its choice
    finally:
        server.stop()


def test_a_feed_naming_another_validator_than_its_signer_is_refused(subnet, store: Path, make_wallet) -> None:
    key = validator_key(subnet, make_wallet)
    other = validator_key(subnet, make_wallet, "named_validator").ss58_address
    app = FastAPI()
    add_feed_routes(app, store, validator=other, respond_json=signed_bytes(key))  # signed, but names another
    server = serve_in_thread(app)
    try:
        code, body = cli(subnet, "resources", "--feed", server.url)
    finally:
        server.stop()
    assert code == EXIT_USAGE and f"names validator {other}" in body["error"]["message"], body


class Middle:
    """A man in the middle of the feed: raises the uptime it forwards, or replays an old answer."""

    def __init__(self, upstream: str, mode: str) -> None:
        self.kept: httpx.Response | None = None
        app = FastAPI()

        @app.get(FEED_PATH)
        async def feed(request: Request) -> Response:
            if mode != "replay" or self.kept is None:
                async with httpx.AsyncClient() as client:
                    self.kept = await client.get(upstream + FEED_PATH, params=request.query_params)
            body = self.kept.content
            if mode == "edit":
                body = body.replace(b'"uptime":0.9}', b'"uptime":1.0}')
                assert body != self.kept.content
            headers = {k: v for k, v in self.kept.headers.items() if k.lower().startswith("x-compute")}
            return Response(body, media_type="application/json", headers=headers)

        self.server: RunningServer = serve_in_thread(app)


@pytest.mark.parametrize("mode", ["edit", "replay"])
def test_an_edited_or_replayed_feed_is_refused(subnet, store: Path, make_wallet, mode: str) -> None:
    real = serve_in_thread(build_app(store, keypair=validator_key(subnet, make_wallet)))
    middle = Middle(real.url, mode)
    try:
        if mode == "replay":
            httpx.get(middle.server.url + FEED_PATH, params={"nonce": "an-old-request"})
        code, body = cli(subnet, "resources", "--feed", middle.server.url)
    finally:
        middle.server.stop()
        real.stop()
    assert code == EXIT_USAGE, body
    expected = "does not verify" if mode == "edit" else "signed for another request"
    assert expected in body["error"]["message"]


@pytest.mark.parametrize("mode", ["drip", "huge"])
@pytest.mark.slow
def test_a_slow_or_huge_feed_is_cut_off_in_time_with_bounded_memory(subnet, hostile, mode: str) -> None:  # noqa: F811
    server = hostile(mode)
    argv = [sys.executable, str(REPO / "neurons" / "register.py"), *subnet.flags("operator_a")]
    argv += ["--register.timeout", "5", "resources", "--feed", server.url, "--json"]
    code, out, peak_kib, took = run_measured(argv, {**os.environ, "PYTHONPATH": str(REPO)})
    assert code == EXIT_USAGE, out
    assert ("within 5s" if mode == "drip" else "more than") in out
    assert took < 5 + 20  # the deadline holds for the whole answer (the process's start-up aside)
    assert peak_kib < 300 * 1024  # KiB: the size cap holds (measured after exec: ru_maxrss of a
    # child forked from a large test process counts that process too)


def _machine(uid: int, uptime: float | None, gpus: int = 1) -> Machine:
    proof = (
        VerifiedGpus(f"hk{uid}", "NVIDIA H100", gpus, 1.0, uptime_30d=uptime) if uptime is not None else None
    )
    return Machine(
        uid=uid, hotkey=f"hk{uid}", endpoint="127.0.0.1:1", online=True, error=None, verified=proof is not None,
        gpu_model="NVIDIA H100", gpu_count=gpus, gpu_memory_gb=80.0, cpu=8, ram_gb=64.0, disk_gb=100.0,
        available=True, free_gpus=gpus, active_leases=0, max_duration_s=86400, backend="docker", version="x",
        proof=proof,
    )  # fmt: skip


def test_rank_puts_the_machines_a_validator_found_there_more_often_first() -> None:
    machines = [
        _machine(1, 0.62),
        _machine(2, None),
        _machine(3, 0.99),
        _machine(4, 0.97, gpus=2),
        _machine(5, 0.96),
    ]
    order = [m.uid for m in rank(machines, Wanted(gpu_count=1))]
    # verified first; 5 % uptime steps (0.99, 0.97, 0.96 tie), then the smallest fit; unverified last
    assert order == [3, 5, 4, 1, 2]
