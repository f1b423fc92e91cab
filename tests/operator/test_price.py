"""A miner's asking price, from ``--miner.price`` to what the renter sees, filters by and has spent.

The miner is the real miner app on 127.0.0.1 answering the signed ``PriceRequest``; the renter is
``register.py`` in-process and the SDK, with real wallets on a simulated chain. The price is
informational: no validator reads it (docs/renting.md).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from operator_helpers import GPU_NAME
from shellflow import cli, cli_text

from compute.chain import connect
from compute.miner.price import PriceError, lease_price, parse_price, price_for
from compute.operator import EXIT_OK, EXIT_REFUSED
from compute.protocol import GpuSpec, Price, PriceRequest, PriceResponse
from compute.renter import AsyncRenter
from compute.settings import parse_miner
from compute.transport import MinerClient, load_wallet

# The miner answers one hotkey 10 requests a second (burst 20); each `resources` asks it three
# times. A quiet machine ran this test's calls fast enough to be refused (rate_limited): the last
# table then showed no price, as a renter's would. Rest the bucket where the calls pile up.
RESTED_S = 2.1


def test_the_fixtures_price_is_what_the_flag_gives():
    assert price_for(
        parse_price("H100=2.50, base=0.05"), [GpuSpec(index=0, name=GPU_NAME, memory_bytes=1)]
    ) == Price(base_hour=0.05, gpu_hour={GPU_NAME: 2.5})


def _online(body: dict) -> list[dict]:
    return [m for m in body["machines"] if m["online"]]


def test_renter_sees_the_signed_price_filters_by_it_and_sees_spend_so_far(priced_subnet):
    subnet = priced_subnet
    code, body = cli(subnet, "operator_a", "resources")
    assert code == EXIT_OK
    [machine] = _online(body)
    assert machine["price"] == {"currency": "USD", "base_hour": 0.05, "gpu_hour": {GPU_NAME: 2.5}}
    assert machine["price_per_hour_all_gpus"] == pytest.approx(2.55)
    code, body = cli(subnet, "operator_a", "resources", "--gpu-count", "1", "--max-price", "2.5")
    assert code == EXIT_OK and _online(body) == []  # 2.55 an hour is over 2.50
    code, body = cli(subnet, "operator_a", "resources", "--gpu-count", "1", "--max-price", "2.55")
    assert code == EXIT_OK and len(_online(body)) == 1
    code, body = cli(subnet, "operator_a", "resources", "--max-price", "0.05")  # a CPU lease: base only
    assert code == EXIT_OK and len(_online(body)) == 1

    time.sleep(RESTED_S)  # four `resources` asked 12 times: the allocations below ask 10 more
    code, body = cli(subnet, "operator_a", "allocate", "--gpu-count", "1", "--max-price", "1")
    assert code == EXIT_REFUSED and body["error"]["code"] == "no_matching_machine", body
    uid = str(subnet.miner_uid)
    code, body = cli(subnet, "operator_a", "allocate", "--uid", uid, "--gpu-count", "1", "--max-price", "1")
    assert code == EXIT_REFUSED and "asks $2.55/h, over your --max-price $1/h" in body["error"]["message"]
    code, body = cli(subnet, "operator_a", "allocate", "--gpu-count", "1", "--max-price", "3", "--ttl", "2h")
    assert code == EXIT_OK, body
    assert body["lease"]["price_per_hour"] == pytest.approx(2.55)  # as the miner signed it
    code, body = cli(subnet, "operator_a", "list")
    [lease] = body["leases"]
    assert lease["price_per_hour"] == pytest.approx(2.55) and 0 <= lease["spent_usd"] < 0.01
    code, out, _ = cli_text(subnet, "operator_a", "list")
    assert code == EXIT_OK and "Spent (price)" in out and "$0.00 ($2.55/h)" in out
    time.sleep(RESTED_S)
    code, out, _ = cli_text(subnet, "operator_a", "resources")
    assert code == EXIT_OK and "$2.5/GPU-h + $0.05/h" in out


def test_a_miner_without_a_price_is_left_out_by_max_price_but_shown_without(subnet):
    code, body = cli(subnet, "operator_a", "resources")
    [machine] = _online(body)
    assert machine["price"] is None and machine["price_per_hour_all_gpus"] is None
    code, body = cli(subnet, "operator_a", "resources", "--max-price", "1000")
    assert code == EXIT_OK and _online(body) == []
    code, body = cli(subnet, "operator_a", "allocate", "--ttl", "30m")
    assert code == EXIT_OK and body["lease"]["price_per_hour"] is None and body["lease"]["spent_usd"] is None


def test_the_sdk_exposes_the_price_and_filters_by_it(priced_subnet):
    subnet = priced_subnet

    async def journey() -> None:
        async with AsyncRenter(
            network=f"sim:{subnet.chain_path}",
            netuid=27,
            wallet_name="operator_a",
            wallet_path=str(subnet.wallets_dir),
            data_dir=subnet.root / "register-operator_a",
            timeout=20.0,
        ) as renter:
            [machine] = await renter.machines(gpu_count=1)
            assert machine.price == Price(base_hour=0.05, gpu_hour={GPU_NAME: 2.5})
            assert machine.hourly_price(1) == pytest.approx(2.55)
            assert await renter.machines(gpu_count=1, max_price=2.0) == []
            lease = await renter.allocate(gpu_count=1, max_price=2.6, ttl="30m", wait=False)
            try:
                assert lease.price_per_hour == pytest.approx(2.55)
                assert lease.spent(lease.entry.created_at + 1800) == pytest.approx(2.55 / 2)
            finally:
                await lease.release()

    asyncio.run(journey())


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("H100", "expected MODEL=USD"),
        ("H100=cheap", "is not a number"),
        ("H100=-1", "between 0 and"),
        ("H100=nan", "between 0 and"),
        ("H100=inf", "between 0 and"),
        ("!!=1", "name a GPU model"),
        ("H100=1=2", "expected MODEL=USD"),
    ],
)
def test_a_bad_price_is_refused_with_what_is_wrong(text, problem):
    with pytest.raises(PriceError, match=problem):
        parse_price(text)


def test_each_gpu_is_priced_by_the_model_its_name_names():
    gpus = [
        GpuSpec(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=1, uuid="GPU-a"),
        GpuSpec(index=1, name="NVIDIA A100-SXM4-40GB", memory_bytes=1, uuid="GPU-b"),
        GpuSpec(index=2, name="NVIDIA GeForce RTX 4090", memory_bytes=1, uuid="GPU-c"),
    ]
    price = price_for(parse_price("h100=2.5,A100 SXM4=1.2,base=0.1,H1=9"), gpus)
    assert price == Price(
        base_hour=0.1, gpu_hour={"NVIDIA H100 80GB HBM3": 2.5, "NVIDIA A100-SXM4-40GB": 1.2}
    )
    assert lease_price(price, gpus[:2]) == pytest.approx(3.8)
    assert lease_price(price, []) == pytest.approx(0.1)
    assert lease_price(price, gpus) is None  # the 4090 has no price
    assert lease_price(None, gpus[:1]) is None
    assert price_for(parse_price(""), gpus) == Price()


def test_the_miner_reads_its_price_from_the_flag_or_the_environment():
    assert parse_miner(["--miner.price", "H100=2.5"], env={}).price == "H100=2.5"
    assert parse_miner([], env={"COMPUTE_MINER_PRICE": "base=0.3"}).price == "base=0.3"
    assert parse_miner([], env={}).price == ""


def test_a_bad_price_stops_the_miner_before_it_starts(capsys):
    from neurons.miner import main

    assert main(["--miner.price", "H100=lots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--miner.price: 'H100=lots'" in err


async def _ask_price(net) -> PriceResponse:
    chain = connect(f"sim:{net.chain_path}", 27)
    try:
        [endpoint] = [n.axon for n in chain.metagraph().neurons if n.hotkey == net.miner_hotkey]
    finally:
        chain.close()
    wallet = load_wallet("operator_a", "default", str(net.wallets_dir))
    async with MinerClient(wallet, timeout=10) as client:  # checks the miner hotkey's signature
        return await client.call(endpoint, net.miner_hotkey, PriceRequest())


def test_the_price_route_answers_the_asking_price_signed(priced_subnet):
    assert asyncio.run(_ask_price(priced_subnet)).price == Price(base_hour=0.05, gpu_hour={GPU_NAME: 2.5})


def test_a_miner_without_a_price_answers_none(subnet):
    assert asyncio.run(_ask_price(subnet)).price is None
