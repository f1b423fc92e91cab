"""``associate_evm_key`` on the simulated chain, through the SDK's own ``AssociateEvmKey`` intent.

The chain applies the runtime's rules: a registered hotkey signs, the EVM key's EIP-191 proof over
the hotkey and the block must recover to the address named, and a neuron re-associates once per
7 200 blocks. The same flow is what ``python -m compute collateral associate`` runs.
"""

from __future__ import annotations

import json

import bittensor as bt
import pytest
from bittensor.evm import association_proof
from eth_account import Account

from compute.__main__ import main as compute_main
from compute.chain import ChainError, RateLimited, SimChainState, connect
from compute.chain.sim import SimDispatchError
from compute.chain.sim.evm import EVM_ASSOCIATE_RATE_LIMIT

NETUID = 27


@pytest.fixture
def chain_file(tmp_path):
    SimChainState.create(tmp_path / "chain.db", netuid=NETUID)
    return tmp_path / "chain.db"


def test_a_registered_hotkey_associates_its_evm_key_once_a_day(chain_file, make_wallet) -> None:
    state = SimChainState.open(chain_file)
    wallet = make_wallet("miner")
    uid = state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 1.0)
    first, second = Account.create(), Account.create()
    chain = connect(f"sim:{chain_file}", NETUID)
    try:
        block = chain.associate_evm_key(wallet, first)
        assert state.evm_keys(NETUID) == {uid: (first.address.lower(), block)}
        with pytest.raises(RateLimited, match="EVM key"):
            chain.associate_evm_key(wallet, second)  # again within 7 200 blocks
        assert state.evm_keys(NETUID)[uid][0] == first.address.lower()
    finally:
        chain.close()
    later = SimChainState.open(chain_file, clock=lambda: state.genesis_time + EVM_ASSOCIATE_RATE_LIMIT + 5)
    proof, at = association_proof(second, wallet.hotkey.ss58_address, later.block())
    later.associate_evm_key(NETUID, wallet.hotkey.ss58_address, second.address, at, bytes.fromhex(proof[2:]))
    assert later.evm_keys(NETUID)[uid][0] == second.address.lower()


def test_a_proof_by_another_key_or_an_unregistered_hotkey_is_refused(chain_file, make_wallet) -> None:
    state = SimChainState.open(chain_file)
    wallet = make_wallet("miner")
    state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 1.0)
    claimed, signer = Account.create(), Account.create()
    proof, block = association_proof(signer, wallet.hotkey.ss58_address, state.block())
    with pytest.raises(SimDispatchError, match="signed by"):
        state.associate_evm_key(
            NETUID, wallet.hotkey.ss58_address, claimed.address, block, bytes.fromhex(proof[2:])
        )
    stranger: bt.Wallet = make_wallet("stranger")
    chain = connect(f"sim:{chain_file}", NETUID)
    try:
        with pytest.raises(ChainError):
            chain.associate_evm_key(stranger, signer)
    finally:
        chain.close()
    assert state.evm_keys(NETUID) == {}


def test_the_associate_command_links_the_key_from_the_environment(
    chain_file, make_wallet, tmp_path, monkeypatch, capsys
) -> None:
    state = SimChainState.open(chain_file)
    wallet = make_wallet("miner")
    uid = state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 1.0)
    account = Account.create()
    monkeypatch.setenv("COLLATERAL_EVM_KEY", account.key.hex())
    monkeypatch.chdir(tmp_path)
    flags = ["--subtensor.network", f"sim:{chain_file}", "--netuid", str(NETUID), "--wallet.name", "miner"]
    flags += ["--wallet.path", str(tmp_path / "wallets"), "--json"]
    assert compute_main(["collateral", "associate", *flags]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["evm"] == account.address.lower() and out["hotkey"] == wallet.hotkey.ss58_address
    assert state.evm_keys(NETUID)[uid][0] == account.address.lower()
    assert compute_main(["collateral", "associate", *flags]) == 1  # rate-limited: a clear error, exit 1
    assert "associate_evm_key refused" in capsys.readouterr().err
