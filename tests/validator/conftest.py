"""Fixtures for validator tests: real miners on 127.0.0.1 (some cheating), the validator's client,
a simulated chain. Helpers live in validator_helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from validator_helpers import Miner, cheat_bin, port_block, register_and_serve, validator_client_of

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.chain import SimChainState, connect
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.miner.verdicts import FILE_NAME, VerdictLog
from compute.protocol import GpuSpec
from compute.store import ValidatorStore
from compute.transport import KeyWallet, ServerLimits, serve_in_thread


@pytest.fixture
def start_miner(tmp_path: Path, make_wallet):
    running = []

    def start(
        name: str,
        cheat: str | None = None,
        gpus: tuple[GpuSpec, ...] = (),
        policy=None,
        path_prefix: tuple[Path, ...] = (),
        price=None,
    ) -> Miner:
        wallet = make_wallet(name)
        data = tmp_path / name
        path_prefix = [cheat_bin(tmp_path, cheat)] if cheat else list(path_prefix)
        backend = EmbeddedBackend(
            data, bind_host="127.0.0.1", port_range=port_block(), path_prefix=path_prefix
        )
        manager = AllocationManager(
            LeaseStore(data / "leases.db"),
            backend,
            list(gpus),
            ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10),
        )
        specs = fixed_specs(gpus)
        keypair = KeyWallet.from_wallet(wallet)
        app = build_miner_app(
            keypair,
            policy,
            manager,
            lambda: specs,
            ServerLimits(rate_per_s=100, burst=100),
            verdicts=VerdictLog(data / FILE_NAME),
            price=price,
        )
        server = serve_in_thread(app, "127.0.0.1", 0)
        running.append(server)
        return Miner(name, f"127.0.0.1:{server.port}", keypair.ss58, wallet, manager, backend)

    yield start
    for server in running:
        server.stop()


@pytest.fixture
async def validator_client(make_wallet):
    async with validator_client_of(make_wallet("validator"), 30) as client:
        yield client


@pytest.fixture
def sim_chain(tmp_path: Path):
    """A fresh simulated chain file; returns (path, state)."""
    path = tmp_path / "chain.db"
    state = SimChainState.create(path, netuid=27, block_time=0.2, weights_rate_limit=5)
    return path, state


@pytest.fixture
def sim_net(tmp_path: Path, sim_chain, start_miner, validator_client):
    """Factory: the validator registered with a permit, then ``{name: cheat}`` miners registered and
    serving; returns (chain, store, validator wallet, {name: uid}) and closes chain and store after."""
    opened: list = []

    def make(miners: dict[str, str | None]):
        path, state = sim_chain
        wallet = validator_client.wallet_obj
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0, True)
        uids = {
            name: register_and_serve(path, state, start_miner(name, cheat=cheat))
            for name, cheat in miners.items()
        }
        chain = connect(f"sim:{path}", 27)
        store = ValidatorStore(tmp_path / "validator.db")
        opened.append((store, chain))
        return chain, store, wallet, uids

    yield make
    for store, chain in opened:
        store.close()
        chain.close()
