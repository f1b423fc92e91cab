"""Who gets in: chain-backed policy decisions, over HTTP and in isolation."""

from __future__ import annotations

import asyncio

import pytest
from transport_helpers import EchoRequest, EchoResponse, build_server, neuron, snapshot

from compute.transport import AccessPolicy, Forbidden, MinerClient, PolicyUnavailable, Rejected


@pytest.fixture
def cast(keys):
    names = ["miner", "validator", "minnow", "no-permit", "denied-hot", "denied-cold", "stranger"]
    return {name: keys(name) for name in names}


def chain_of(cast):
    return snapshot(
        neuron(0, cast["miner"], 0.0, permit=False),
        neuron(1, cast["validator"], 5000.0),
        neuron(2, cast["minnow"], 10.0),
        neuron(3, cast["no-permit"], 5000.0, permit=False),
        neuron(4, cast["denied-hot"], 5000.0),
        neuron(5, cast["denied-cold"], 5000.0),
    )


async def test_each_refused_caller_gets_403_with_its_reason(cast, start):
    policy = AccessPolicy(
        lambda: chain_of(cast),
        min_stake=1000.0,
        require_permit=True,
        deny_hotkeys=[cast["denied-hot"].ss58],
        deny_coldkeys=[cast["denied-cold"].coldkeypub.ss58_address],
    )
    miner = cast["miner"]
    endpoint = start(build_server(miner, policy))
    expected = {
        "stranger": f"hotkey {cast['stranger'].ss58} is not registered on subnet 27",
        "minnow": "stake 10.0000 TAO is below the threshold 1000 TAO",
        "no-permit": f"hotkey {cast['no-permit'].ss58} has no validator permit",
        "denied-hot": f"hotkey {cast['denied-hot'].ss58} is denied by this miner",
        "denied-cold": f"coldkey {cast['denied-cold'].coldkeypub.ss58_address} of hotkey "
        f"{cast['denied-cold'].ss58} is denied by this miner",
    }
    for name, reason in expected.items():
        async with MinerClient(cast[name]) as client:
            with pytest.raises(Rejected) as exc:
                await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)
        assert (exc.value.status, exc.value.code, exc.value.reason) == (403, "forbidden", reason), name
    async with MinerClient(cast["validator"]) as client:
        ok = await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)
    assert ok.caller == cast["validator"].ss58


def test_allow_lists_restrict_and_deny_wins(cast):
    validator, other = cast["validator"], cast["no-permit"]
    policy = AccessPolicy(
        lambda: chain_of(cast),
        require_permit=False,
        allow_hotkeys=[validator.ss58, other.ss58],
        deny_hotkeys=[other.ss58],
    )
    policy.load()
    policy.check(validator.ss58)
    with pytest.raises(Forbidden, match="denied"):
        policy.check(other.ss58)
    with pytest.raises(Forbidden, match="not on this miner's allow list"):
        policy.check(cast["minnow"].ss58)
    cold = AccessPolicy(
        lambda: chain_of(cast), require_permit=False, allow_coldkeys=[validator.coldkeypub.ss58_address]
    )
    cold.load()
    cold.check(validator.ss58)
    with pytest.raises(Forbidden, match="coldkey .* is not on this miner's allow list"):
        cold.check(cast["minnow"].ss58)


def test_priority_is_stake_and_unknown_is_zero(cast):
    policy = AccessPolicy(lambda: chain_of(cast))
    policy.load()
    assert policy.priority(cast["validator"].ss58) == 5000.0
    assert policy.priority(cast["minnow"].ss58) == 10.0
    assert policy.priority(cast["stranger"].ss58) == 0.0


async def test_failed_refresh_keeps_last_good_snapshot(cast):
    calls = {"n": 0}

    def provider():
        calls["n"] += 1
        if calls["n"] > 1:
            raise ConnectionError("chain endpoint down")
        return chain_of(cast)

    policy = AccessPolicy(provider, min_stake=1000.0)
    with pytest.raises(PolicyUnavailable):
        policy.check(cast["validator"].ss58)
    assert await policy.refresh() is True
    assert await policy.refresh() is False
    assert policy.failures == 1
    policy.check(cast["validator"].ss58)  # still admitted from the last good snapshot


async def test_refresh_runs_off_the_event_loop(cast):
    """A slow chain read must not stall other coroutines."""
    import time

    def slow_provider():
        time.sleep(0.5)
        return chain_of(cast)

    policy = AccessPolicy(slow_provider)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    task = asyncio.create_task(ticker())
    await policy.refresh()
    task.cancel()
    assert ticks >= 10 and policy.loaded


async def test_background_loop_picks_up_new_registrations(cast):
    state = {"snap": snapshot(neuron(1, cast["validator"], 5000.0))}
    policy = AccessPolicy(lambda: state["snap"], refresh_s=0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(policy.run(stop))
    await asyncio.sleep(0.1)
    with pytest.raises(Forbidden):
        policy.check(cast["minnow"].ss58)
    state["snap"] = snapshot(neuron(1, cast["validator"], 5000.0), neuron(2, cast["minnow"], 5000.0))
    await asyncio.sleep(0.3)
    policy.check(cast["minnow"].ss58)
    stop.set()
    await asyncio.wait_for(task, 2)


async def test_miner_without_any_metagraph_answers_503_not_403(cast, start):
    def chain_down():
        raise ConnectionError("chain endpoint down")

    miner = cast["miner"]
    endpoint = start(build_server(miner, AccessPolicy(chain_down, refresh_s=60)))
    async with MinerClient(cast["validator"]) as client:
        with pytest.raises(Rejected) as exc:
            await client.request(endpoint, miner.ss58, "/echo", EchoRequest(text="x"), EchoResponse)
    assert (exc.value.status, exc.value.code) == (503, "busy")
    assert "metagraph not loaded" in exc.value.reason


async def test_hung_chain_read_times_out_and_keeps_serving(cast):
    import threading

    release = threading.Event()

    def hung():
        release.wait(5)
        return chain_of(cast)

    policy = AccessPolicy(hung, refresh_timeout_s=0.1)
    started = asyncio.get_running_loop().time()
    assert await policy.refresh() is False
    assert asyncio.get_running_loop().time() - started < 1.0
    release.set()


async def test_saturated_miner_serves_higher_stake_caller_first(cast, start):
    from compute.transport import ServerLimits, SignedServer

    miner, whale, minnow = cast["miner"], cast["validator"], cast["minnow"]
    policy = AccessPolicy(lambda: chain_of(cast), require_permit=False)
    server = SignedServer(
        miner, policy, ServerLimits(max_concurrency=1, queue_timeout_s=5, rate_per_s=100, burst=100)
    )
    served: list[str] = []

    @server.route("/work", EchoRequest, EchoResponse)
    async def work(req, caller):
        served.append(req.text)
        await asyncio.sleep(0.4 if req.text == "hold" else 0.01)
        return EchoResponse(text=req.text, caller=caller.hotkey_ss58)

    endpoint = start(server)
    async with MinerClient(whale) as big, MinerClient(minnow) as small:

        def send(client, text):
            return asyncio.create_task(
                client.request(endpoint, miner.ss58, "/work", EchoRequest(text=text), EchoResponse)
            )

        hold = send(big, "hold")
        await asyncio.sleep(0.15)
        low = send(small, "minnow")
        await asyncio.sleep(0.1)
        high = send(big, "whale")
        await asyncio.gather(hold, low, high)
    assert served == ["hold", "whale", "minnow"]
