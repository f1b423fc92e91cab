"""A real EVM in process (eth-tester on py-evm) with the real bytecode: the production stake source
over the precompile doubles, a miner with an associated EVM key, validators, a renter.

A module of its own name, not conftest: a test that imports ``conftest`` by name gets whichever
directory's conftest pytest loaded last."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytest.importorskip("web3", reason="the collateral extra is not installed (pip install -e '.[dev]')")

from bittensor.sp_core import Keypair  # noqa: E402
from eth_account.signers.local import LocalAccount  # noqa: E402

from compute.collateral.chain import CollateralClient, CollateralConfig  # noqa: E402
from compute.collateral.deploy import Stack, deploy_stack  # noqa: E402
from compute.collateral.devchain import LocalChain, local_chain  # noqa: E402
from compute.collateral.windows import Windows  # noqa: E402

TAO = 10**18
RATE = TAO  # one day of rent of one GPU
DELAY = 3600
TTL = 7200  # longer than the reclaim delay: a slash opened just before it still completes
BOND = TAO // 10  # what opening a proposal costs (a tenth of the rate: the default)
# windows these short delays fit (a 30-minute longest lease, a 50-minute cheat window)
WINDOWS = Windows(cheat_window_s=3000, dead_s=60, max_term_s=1800, assembly_s=600)


@dataclass
class Party:
    name: str
    keypair: Keypair
    account: LocalAccount
    client: CollateralClient

    @property
    def hotkey(self) -> str:
        return self.keypair.ss58_address

    @property
    def address(self) -> str:
        return self.account.address.lower()


@dataclass
class World:
    chain: LocalChain
    stack: Stack
    config: CollateralConfig
    miner: Party
    validators: list[Party]
    renter: Party
    next_uid: int = 10

    def party(self, name: str, stake: int = 0, validator: bool = False, uid: int | None = None) -> Party:
        """A new hotkey with a funded, associated EVM key (a neuron at ``uid``, new by default)."""
        keypair = Keypair.create_from_uri(f"//{name}")
        account = self.chain.new_account()
        if uid is None:
            uid, self.next_uid = self.next_uid, self.next_uid + 1
            assert self.stack.mirror is not None
            self.stack.mirror.set_neuron(uid, keypair.ss58_address, stake, validator)
        assert self.stack.mirror is not None
        self.stack.mirror.associate(account.address, uid)
        return Party(name, keypair, account, self.stack.client(self.chain.w3, account))

    def set_stake(self, uid: int, party: Party, stake: int) -> None:
        assert self.stack.mirror is not None
        self.stack.mirror.set_neuron(uid, party.hotkey, stake, True)

    def balance(self, address: str) -> int:
        return int(self.chain.w3.eth.get_balance(self.chain.w3.to_checksum_address(address)))


def make_world(config: CollateralConfig | None = None, stakes: tuple[int, ...] = (30, 30, 40)) -> World:
    chain = local_chain()
    config = config or CollateralConfig(
        rate_per_gpu_day=RATE, min_deposit=TAO // 10, reclaim_delay_s=DELAY, proposal_ttl_s=TTL
    )
    stack = deploy_stack(chain.w3, chain.accounts[0], config, 27, doubles=True, windows=WINDOWS)
    assert stack.mirror is not None
    world = World(chain, stack, config, miner=None, validators=[], renter=None)  # type: ignore[arg-type]
    miner_key = Keypair.create_from_uri("//miner")
    stack.mirror.set_neuron(0, miner_key.ss58_address, 5, False)  # a miner: stake but no permit
    world.miner = world.party("miner", uid=0)
    for index, stake in enumerate(stakes):
        keypair = Keypair.create_from_uri(f"//validator-{index}")
        stack.mirror.set_neuron(index + 1, keypair.ss58_address, stake, True)
        world.validators.append(world.party(f"validator-{index}", uid=index + 1))
    renter_key = Keypair.create_from_uri("//renter")
    world.renter = Party("renter", renter_key, chain.new_account(), None)  # type: ignore[arg-type]
    world.renter.client = stack.client(chain.w3, world.renter.account)
    return world
