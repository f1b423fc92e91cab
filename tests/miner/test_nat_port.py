"""Behind NAT a miner publishes the port validators reach (--axon.external_port), not its local one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from minerkit import free_port, port_block, start_miner

from compute.chain import SimChainState, connect
from compute.settings import parse_miner

NETUID = 5


def test_external_port_defaults_to_the_local_port_and_is_validated() -> None:
    sim = ["--subtensor.network", "sim:/tmp/x.db"]
    assert parse_miner([*sim, "--axon.port", "9000"], env={}).public_port == 9000
    nat = parse_miner([*sim, "--axon.port", "9000", "--axon.external_port", "18091"], env={})
    assert nat.public_port == 18091 and nat.axon_port == 9000
    assert parse_miner(sim, env={"COMPUTE_AXON_EXTERNAL_PORT": "18092"}).public_port == 18092


@pytest.mark.slow
def test_miner_process_publishes_the_external_ip_and_port_on_chain(tmp_path: Path, wallets) -> None:
    state = SimChainState.create(tmp_path / "chain.db", netuid=NETUID, block_time=1.0)
    miner = wallets["miner"]
    state.register(miner.hotkey.ss58_address, miner.coldkeypub.ss58_address, 5000.0, False)
    network, port, (low, high) = f"sim:{tmp_path / 'chain.db'}", free_port(), port_block()
    args = [
        "--subtensor.network",
        network,
        "--netuid",
        str(NETUID),
        "--wallet.path",
        str(tmp_path / "wallets"),
    ]
    args += ["--wallet.name", "miner", "--axon.ip", "127.0.0.1", "--axon.port", str(port)]
    args += ["--axon.external_ip", "203.0.113.10", "--axon.external_port", "18091"]
    args += ["--miner.backend", "embedded", "--miner.data_dir", str(tmp_path / "data")]
    args += ["--miner.ssh_port_range", f"{low}-{high}", "--env_file", str(tmp_path / "none.env")]
    log = tmp_path / "miner.log"
    proc = start_miner(args, log)
    chain = connect(network, NETUID)
    try:
        deadline, axon = time.monotonic() + 60, None
        while time.monotonic() < deadline and axon is None and proc.poll() is None:
            axon = chain.metagraph().by_hotkey()[miner.hotkey.ss58_address].axon
            time.sleep(0.3)
        assert axon == "203.0.113.10:18091", log.read_text()[-2000:]
    finally:
        chain.close()
        proc.terminate()
        proc.wait(15)
