"""Deploy the contracts: the production stack over subtensor's precompiles, or doubles for tests.

``deploy_stack`` puts a :class:`SubtensorStakeSource` in front of the metagraph and UID-lookup
precompiles (``PRECOMPILES``) on subtensor; on any other chain it first deploys the doubles
(``MetagraphDouble``, ``UidLookupDouble``) and returns a :class:`Mirror` that copies a metagraph
and EVM-key associations into them, so the adapter and the contract run unchanged. It refuses a
configuration whose windows do not fit together (``compute.collateral.windows``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3

from compute.collateral.artifact import compiled
from compute.collateral.chain import CollateralClient, CollateralConfig
from compute.collateral.errors import CollateralError
from compute.collateral.identity import checked_h160, hotkey_bytes32
from compute.collateral.windows import PRODUCTION, Windows

# subtensor's precompiles (precompiles/src/solidity/metagraph.sol, uidLookup.sol)
METAGRAPH_PRECOMPILE = "0x0000000000000000000000000000000000000802"
UID_LOOKUP_PRECOMPILE = "0x0000000000000000000000000000000000000806"


def send(w3: Web3, account: LocalAccount, params: dict[str, Any]) -> Any:
    """Sign and send ``params`` from ``account``; the receipt (raises when it failed)."""
    tx: Any = dict(params)
    tx.setdefault("from", account.address)
    tx.setdefault("nonce", w3.eth.get_transaction_count(account.address, "pending"))
    tx.setdefault("chainId", w3.eth.chain_id)
    if "gas" not in tx:
        tx["gas"] = int(w3.eth.estimate_gas(tx) * 1.2) + 20_000
    if "maxFeePerGas" not in tx and "gasPrice" not in tx:
        tx["gasPrice"] = w3.eth.gas_price
    signed = account.sign_transaction(tx)
    receipt = w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(signed.raw_transaction))
    if receipt["status"] != 1:
        raise CollateralError(f"transaction failed: {receipt['transactionHash'].hex()}")
    return receipt


def deploy(w3: Web3, account: LocalAccount, name: str, *args: Any) -> tuple[str, int]:
    """Deploy contract ``name`` with constructor ``args``; (address, gas used)."""
    unit = compiled(name)
    factory = w3.eth.contract(abi=unit.abi, bytecode=unit.bytecode)
    tx = factory.constructor(*args).build_transaction({"from": account.address, "nonce": 0, "gas": 1})
    receipt = send(w3, account, {"data": tx["data"], "value": 0})
    return receipt["contractAddress"], int(receipt["gasUsed"])


def _address(text: str) -> Any:
    return Web3.to_checksum_address(checked_h160(text))


@dataclass
class Mirror:
    """The doubles of the metagraph and UID-lookup precompiles, kept by their deployer."""

    w3: Web3
    keeper: LocalAccount
    metagraph: str
    uid_lookup: str

    def set_neuron(self, uid: int, hotkey: str, stake: int, validator: bool) -> None:
        contract = self.w3.eth.contract(address=_address(self.metagraph), abi=compiled("MetagraphDouble").abi)
        self._transact(contract.functions.setNeuron(uid, hotkey_bytes32(hotkey), stake, validator))

    def associate(self, evm_address: str, uid: int) -> None:
        """What ``associate_evm_key`` records on subtensor: this EVM key speaks for ``uid``."""
        contract = self.w3.eth.contract(
            address=_address(self.uid_lookup), abi=compiled("UidLookupDouble").abi
        )
        address = Web3.to_checksum_address(checked_h160(evm_address))
        self._transact(contract.functions.associate(address, uid))

    def dissociate(self, evm_address: str) -> None:
        contract = self.w3.eth.contract(
            address=_address(self.uid_lookup), abi=compiled("UidLookupDouble").abi
        )
        self._transact(contract.functions.dissociate(Web3.to_checksum_address(checked_h160(evm_address))))

    def _transact(self, call: Any) -> None:
        tx = call.build_transaction({"from": self.keeper.address, "gas": 1, "nonce": 0})
        send(self.w3, self.keeper, {"to": tx["to"], "data": tx["data"], "value": 0})


@dataclass
class Stack:
    collateral: str
    stake_source: str
    mirror: Mirror | None  # None on subtensor (the real precompiles)
    gas: dict[str, int]

    def client(self, w3: Web3, account: LocalAccount | None = None) -> CollateralClient:
        return CollateralClient(w3, self.collateral, account)


def deploy_stack(
    w3: Web3,
    account: LocalAccount,
    config: CollateralConfig,
    netuid: int,
    *,
    doubles: bool,
    windows: Windows = PRODUCTION,
) -> Stack:
    """Deploy the stake source and the collateral contract (and the precompile doubles if asked);
    CollateralError when ``config``'s expiry and reclaim delay do not fit ``windows``."""
    problems = windows.problems(config.proposal_ttl_s, config.reclaim_delay_s)
    if problems:
        raise CollateralError("refusing to deploy: " + "; ".join(problems))
    gas: dict[str, int] = {}
    mirror = None
    if doubles:
        metagraph, gas["MetagraphDouble"] = deploy(w3, account, "MetagraphDouble")
        uid_lookup, gas["UidLookupDouble"] = deploy(w3, account, "UidLookupDouble")
        mirror = Mirror(w3, account, metagraph, uid_lookup)
    else:
        metagraph, uid_lookup = METAGRAPH_PRECOMPILE, UID_LOOKUP_PRECOMPILE
    source, gas["SubtensorStakeSource"] = deploy(
        w3, account, "SubtensorStakeSource", netuid, metagraph, uid_lookup
    )
    collateral, gas["Collateral"] = deploy(
        w3,
        account,
        "Collateral",
        source,
        config.rate_per_gpu_day,
        config.min_deposit,
        config.reclaim_delay_s,
        config.proposal_ttl_s,
        config.kappa_bps,
        config.renter_share_bps,
        Web3.to_checksum_address(checked_h160(config.remainder_to)),
        config.bond,
    )
    return Stack(collateral, source, mirror, gas)
