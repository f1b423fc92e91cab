"""Fixtures for miner tests: a real signed miner app (embedded backend) on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest
from minerkit import H100, NETUID, Miner, port_block, snapshot

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.chain import SimChainState
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.transport import AccessPolicy, KeyWallet, MinerClient, ServerLimits, serve_in_thread


@pytest.fixture
def wallets(make_wallet):
    return {name: make_wallet(name) for name in ("miner", "validator", "stranger", "nobody")}


@pytest.fixture
def miner(tmp_path: Path, wallets):
    neurons = [
        (wallets[n].hotkey.ss58_address, wallets[n].coldkeypub.ss58_address, 5000.0, n != "miner")
        for n in ("miner", "validator", "stranger")
    ]
    policy = AccessPolicy(lambda: snapshot(*neurons), min_stake=1000.0, require_permit=True)
    backend = EmbeddedBackend(tmp_path / "data", bind_host="127.0.0.1", port_range=port_block())
    manager = AllocationManager(
        LeaseStore(tmp_path / "data" / "leases.db"),
        backend,
        [H100],
        ManagerLimits(max_cpu=4, max_memory_gb=8, max_disk_gb=50, max_lease_s=7 * 86400),
    )
    specs = fixed_specs([H100])
    keypair = KeyWallet.from_wallet(wallets["miner"])
    app = build_miner_app(keypair, policy, manager, lambda: specs, ServerLimits(rate_per_s=100, burst=100))
    running = serve_in_thread(app, "127.0.0.1", 0)
    yield Miner(f"127.0.0.1:{running.port}", keypair.ss58, manager, backend)
    running.stop()


@pytest.fixture
async def clients(wallets):
    opened = {name: MinerClient(wallets[name], timeout=30) for name in ("validator", "stranger", "nobody")}
    yield opened
    for client in opened.values():
        await client.aclose()


@pytest.fixture
def sim_network(tmp_path: Path, wallets) -> str:
    """A simulated chain with the miner (no permit) and a validator registered; its network flag."""
    state = SimChainState.create(tmp_path / "chain.db", netuid=NETUID, block_time=1.0)
    for name, permit in (("miner", False), ("validator", True)):
        wallet = wallets[name]
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0, permit)
    return f"sim:{tmp_path / 'chain.db'}"
