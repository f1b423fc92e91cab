"""compute.chain against the simulated chain, through the real SDK code paths and real wallets."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from compute.chain import (
    ChainError,
    ChainUnavailable,
    NotRegistered,
    RateLimited,
    SimChainState,
    connect,
)
from compute.chain.sim import SimSubstrate, SimUnsupported

REPO = Path(__file__).resolve().parents[2]
NETUID = 27


@pytest.fixture
def chain_file(tmp_path: Path) -> Path:
    path = tmp_path / "chain.db"
    SimChainState.create(path, netuid=NETUID, block_time=1.0, weights_rate_limit=100)
    return path


@pytest.fixture
def neurons(chain_file: Path, make_wallet):
    """A validator (permit, 1000 TAO) at uid 0 and two miners at uids 1 and 2."""
    state = SimChainState.open(chain_file)
    validator, miner_a, miner_b = make_wallet("validator"), make_wallet("miner_a"), make_wallet("miner_b")
    state.register(validator.hotkey.ss58_address, validator.coldkeypub.ss58_address, 1000.0, True)
    for wallet in (miner_a, miner_b):
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 10.0)
    return validator, miner_a, miner_b


@pytest.fixture
def chain(chain_file: Path):
    client = connect(f"sim:{chain_file}", NETUID)
    yield client
    client.close()


def test_served_axon_reads_back_from_metagraph(chain, neurons):
    _, miner, _ = neurons
    chain.serve(miner, "10.1.2.3", 8091)
    graph = chain.metagraph()
    assert graph.by_hotkey()[miner.hotkey.ss58_address].axon == "10.1.2.3:8091"
    assert graph.uid_of(miner.hotkey.ss58_address) == 1
    assert [n.axon for n in graph.neurons] == [None, "10.1.2.3:8091", None]


def test_serving_the_same_endpoint_again_submits_nothing(chain, neurons, caplog):
    _, miner, _ = neurons
    chain.serve(miner, "10.1.2.3", 8091)
    caplog.set_level(logging.INFO, logger="compute.chain.client")
    chain.serve(miner, "10.1.2.3", 8091)
    assert "axon already served" in caplog.text
    chain.serve(miner, "10.1.2.3", 9000)
    assert chain.metagraph().neurons[1].axon == "10.1.2.3:9000"


def test_metagraph_reports_stake_permit_and_coldkeys(chain, neurons):
    validator, miner_a, _ = neurons
    graph = chain.metagraph()
    assert graph.netuid == NETUID and graph.block == chain.block()
    first = graph.neurons[0]
    assert (first.uid, first.hotkey, first.coldkey) == (
        0,
        validator.hotkey.ss58_address,
        validator.coldkeypub.ss58_address,
    )
    assert (first.stake, first.validator_permit, first.active, first.last_update) == (1000.0, True, True, 0)
    assert (graph.neurons[1].stake, graph.neurons[1].validator_permit) == (10.0, False)
    assert chain.is_registered(miner_a.hotkey.ss58_address)


def test_set_weights_reads_back_normalised(chain, neurons):
    validator, _, _ = neurons
    chain.set_weights(validator, {1: 3.0, 2: 1.0}, version_key=1_000)
    weights = chain.weights(0)
    assert set(weights) == {1, 2}
    assert weights[1] == pytest.approx(0.75, abs=1e-4)
    assert weights[2] == pytest.approx(0.25, abs=1e-4)
    assert chain.weights(1) == {}
    assert chain.metagraph().neurons[0].last_update == chain.block()


def test_second_weight_set_inside_rate_limit_raises_rate_limited(chain, neurons):
    validator, _, _ = neurons
    chain.set_weights(validator, {1: 1.0, 2: 1.0}, version_key=0)
    with pytest.raises(RateLimited, match="rate limit is 100 blocks"):
        chain.set_weights(validator, {1: 1.0}, version_key=0)
    assert chain.weights(0) == pytest.approx({1: 0.5, 2: 0.5})


def test_weights_can_be_set_again_once_the_rate_limit_has_passed(tmp_path, make_wallet):
    path = tmp_path / "fast.db"
    state = SimChainState.create(path, block_time=0.25, weights_rate_limit=2)
    validator, miner = make_wallet("v"), make_wallet("m")
    state.register(validator.hotkey.ss58_address, validator.coldkeypub.ss58_address, 100.0, True)
    state.register(miner.hotkey.ss58_address, miner.coldkeypub.ss58_address, 1.0)
    with connect(f"sim:{path}", NETUID) as chain:
        chain.set_weights(validator, {1: 1.0}, version_key=0)
        time.sleep(0.6)
        chain.set_weights(validator, {0: 1.0, 1: 1.0}, version_key=0)
        assert chain.weights(0) == pytest.approx({0: 0.5, 1: 0.5})


def test_unregistered_hotkey_cannot_set_weights_or_serve(chain, neurons, make_wallet):
    stranger = make_wallet("stranger")
    with pytest.raises(NotRegistered):
        chain.set_weights(stranger, {1: 1.0}, version_key=0)
    with pytest.raises(NotRegistered):
        chain.serve(stranger, "10.0.0.9", 8091)
    assert not chain.is_registered(stranger.hotkey.ss58_address)


def test_miner_without_validator_permit_is_refused_by_the_chain(chain, neurons):
    _, miner, _ = neurons
    with pytest.raises(ChainError, match="validator permit") as caught:
        chain.set_weights(miner, {0: 1.0, 2: 1.0}, version_key=0)
    assert not isinstance(caught.value, (NotRegistered, RateLimited))
    assert chain.weights(1) == {}


def test_weights_are_clipped_to_max_weights_limit(tmp_path, make_wallet):
    path = tmp_path / "clip.db"
    state = SimChainState.create(path, weights_rate_limit=0, max_weights_limit=32768)
    wallets = [make_wallet(f"n{i}") for i in range(3)]
    for i, wallet in enumerate(wallets):
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 1.0, i == 0)
    with connect(f"sim:{path}", NETUID) as chain:
        chain.set_weights(wallets[0], {0: 1.0, 1: 10.0, 2: 1.0}, version_key=0)
        assert max(chain.weights(0).values()) <= 32768 / 65535 + 1e-3


def test_version_key_older_than_required_is_refused(chain_file, chain, neurons):
    validator, _, _ = neurons
    SimChainState.open(chain_file).set_hyperparameter(NETUID, "weights_version_key", 2_000)
    with pytest.raises(ChainError, match="version_key 1000"):
        chain.set_weights(validator, {1: 1.0}, version_key=1_000)
    chain.set_weights(validator, {1: 1.0}, version_key=2_000)


def test_bad_weights_are_rejected_before_reaching_the_chain(chain, neurons):
    validator, _, _ = neurons
    for bad in ({}, {1: float("nan")}, {1: -1.0}):
        with pytest.raises(ValueError):
            chain.set_weights(validator, bad, version_key=0)
    with pytest.raises(ChainError, match="outside"):
        chain.set_weights(validator, {7: 1.0, 1: 1.0}, version_key=0)


def test_weights_set_by_another_process_are_read_back(chain_file, chain, neurons):
    validator, miner, _ = neurons
    script = textwrap.dedent(
        f"""
        import bittensor as bt
        from compute.chain import connect
        v = bt.Wallet(name="validator", hotkey="default", path={str(Path(validator.path))!r})
        m = bt.Wallet(name="miner_a", hotkey="default", path={str(Path(miner.path))!r})
        with connect("sim:{chain_file}", {NETUID}) as chain:
            chain.serve(m, "192.168.7.7", 7000)
            chain.set_weights(v, {{1: 2.0, 2: 6.0}}, version_key=5)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert chain.metagraph().neurons[1].axon == "192.168.7.7:7000"
    assert chain.weights(0) == pytest.approx({1: 0.25, 2: 0.75}, abs=1e-4)


def test_blocks_advance_with_the_wall_clock(tmp_path):
    now = [1_000.0]
    state = SimChainState.create(tmp_path / "c.db", block_time=12.0, genesis_block=50, clock=lambda: now[0])
    assert state.block() == 50
    now[0] += 11.9
    assert state.block() == 50
    now[0] += 0.1
    assert state.block() == 51
    now[0] += 120
    assert state.block() == 61


def test_chain_block_moves_in_real_time(tmp_path):
    path = tmp_path / "c.db"
    SimChainState.create(path, block_time=0.25)
    with connect(f"sim:{path}", NETUID) as chain:
        first = chain.block()
        time.sleep(0.6)
        assert chain.block() >= first + 2


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_closed_endpoint_fails_fast_with_chain_unavailable():
    chain = connect(f"ws://127.0.0.1:{_closed_port()}", NETUID)
    started = time.monotonic()
    with pytest.raises(ChainUnavailable):
        chain.block()
    with pytest.raises(ChainUnavailable):
        chain.metagraph()
    assert time.monotonic() - started < 5
    chain.close()


def test_silent_endpoint_times_out_instead_of_hanging():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # accepts TCP connections but never answers the websocket handshake
    try:
        chain = connect(f"ws://127.0.0.1:{server.getsockname()[1]}", NETUID, connect_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(ChainUnavailable, match="no answer"):
            chain.block()
        assert time.monotonic() - started < 4
        chain.close()
    finally:
        server.close()


def test_network_names_are_validated(tmp_path):
    with pytest.raises(ChainError, match="unknown network"):
        connect("mainnet", NETUID)
    with pytest.raises(ChainError, match="no simulated chain"):
        connect(f"sim:{tmp_path / 'missing.db'}", NETUID)
    with pytest.raises(ChainError, match="netuid"):
        connect("finney", -1)


def test_metagraph_of_missing_subnet_is_an_error(chain_file):
    with (
        connect(f"sim:{chain_file}", 99) as chain,
        pytest.raises(ChainError, match="subnet 99 does not exist"),
    ):
        chain.metagraph()


def test_concurrent_callers_share_one_client(chain, neurons):
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(5):
                assert len(chain.metagraph().neurons) == 3
        except BaseException as error:  # collected and re-raised in the test thread
            errors.append(error)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []


async def test_unknown_storage_item_is_named_in_the_error(chain_file):
    substrate = SimSubstrate(SimChainState.open(chain_file))
    with pytest.raises(SimUnsupported, match="SubtensorModule.Bonds"):
        await substrate.query("SubtensorModule", "Bonds", [NETUID])
    with pytest.raises(SimUnsupported, match="NeuronInfoRuntimeApi.get_neurons"):
        await substrate.runtime_call("NeuronInfoRuntimeApi", "get_neurons", [NETUID])
