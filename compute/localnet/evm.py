"""The demo's EVM: eth-tester served over JSON-RPC on 127.0.0.1, the real contracts, a keeper.

``start_local_evm`` runs the in-process EVM (``compute.collateral.devchain``) behind a JSON-RPC
endpoint every demo process reaches like subtensor's EVM RPC, deploys the production stake source
over the precompile doubles and the Collateral contract, and returns a :class:`LocalEvm` whose
``mirror`` copies the simulated chain into the doubles: each neuron's hotkey, stake and permit
(what subtensor's metagraph precompile answers) and each ``associate_evm_key`` record (what its
UID-lookup precompile answers). The keeper is the only part that is not subtensor's: on the real
chain the precompiles read the runtime's state directly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from compute.chain.sim import SimChainState
from compute.chain.sim.records import RAO_PER_TAO

log = logging.getLogger(__name__)
TAO_WEI = 10**18


@dataclass
class LocalEvm:
    chain: Any  # compute.collateral.devchain.LocalChain
    stack: Any  # compute.collateral.deploy.Stack
    server: Any  # compute.transport.RunningServer
    _neurons: dict[int, tuple[str, int, bool]] = field(default_factory=dict)
    _keys: dict[int, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def address(self) -> str:
        return str(self.stack.collateral).lower()

    def account(self, tao: float = 100.0) -> Any:
        """A new EVM key funded with ``tao`` (gas and deposits)."""
        return self.chain.new_account(int(tao * TAO_WEI))

    def balance(self, address: str) -> int:
        w3 = self.chain.w3
        return int(w3.eth.get_balance(w3.to_checksum_address(address)))

    def mirror(self, state: SimChainState, netuid: int) -> int:
        """Copy neurons and EVM-key associations that changed into the doubles; how many changed."""
        mirror = self.stack.mirror
        changed = 0
        for neuron in state.neurons(netuid):
            row = (neuron.hotkey, int(neuron.stake_rao), bool(neuron.validator_permit))
            if self._neurons.get(neuron.uid) != row:
                mirror.set_neuron(neuron.uid, *row)
                self._neurons[neuron.uid] = row
                changed += 1
        for uid, (key, _block) in state.evm_keys(netuid).items():
            if self._keys.get(uid) != key:
                mirror.associate(key, uid)
                self._keys[uid] = key
                changed += 1
        return changed

    def stop(self) -> None:
        self.server.stop()


def start_local_evm(
    netuid: int,
    rate_tao: float = 1.0,
    reclaim_delay_s: int = 3600,
    proposal_ttl_s: int = 3600,
) -> LocalEvm:
    """The served chain with the contracts deployed (needs the ``collateral`` extra)."""
    from compute.collateral.chain import CollateralConfig
    from compute.collateral.deploy import deploy_stack
    from compute.collateral.devchain import local_chain, rpc_app
    from web3 import Web3

    from compute.transport import serve_in_thread

    chain = local_chain()
    config = CollateralConfig(
        rate_per_gpu_day=int(rate_tao * TAO_WEI),
        min_deposit=TAO_WEI // 10,
        reclaim_delay_s=reclaim_delay_s,
        proposal_ttl_s=proposal_ttl_s,
    )
    stack = deploy_stack(chain.w3, chain.accounts[0], config, netuid, doubles=True)
    server = serve_in_thread(rpc_app(chain), "127.0.0.1", 0)
    # From now on every caller, this process included, goes through the served endpoint: eth-tester
    # is not thread-safe and the endpoint answers one request at a time.
    served = Web3(Web3.HTTPProvider(server.url, request_kwargs={"timeout": 60}))
    chain.w3 = served
    assert stack.mirror is not None
    stack.mirror.w3 = served
    log.info("local EVM at %s: Collateral %s (%.2f TAO per GPU-day)", server.url, stack.collateral, rate_tao)
    return LocalEvm(chain, stack, server)


__all__ = ["RAO_PER_TAO", "TAO_WEI", "LocalEvm", "start_local_evm"]
