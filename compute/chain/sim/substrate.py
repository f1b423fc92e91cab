"""``SimSubstrate``: the SDK's substrate protocol answered from a :class:`SimChainState`.

Handed to ``bt.Subtensor(substrate=SimSubstrate(state))``, it lets the real SDK
code paths run offline: the ``ServeAxon`` and ``SetWeights`` intents (compose,
plan, preflight, submit), ``subnets.metagraph`` (the ``get_metagraph`` runtime
API in the runtime's dict layout) and the ``weights`` read.

Only the storage items, runtime APIs and calls those paths use are answered.
Anything else raises :class:`SimUnsupported` naming the exact item, so a gap is
obvious instead of silently returning ``None``. No signatures are checked and
no fees are charged: the signer is trusted to be ``keypair.ss58_address``.
This mirrors a private-ish SDK seam (``bittensor/_substrate.py``): pin the SDK
minor version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bittensor.balance import Balance
from bittensor.result import ChainError, ExtrinsicResult

from .state import AxonUpdate, SimChainState, SimDispatchError

log = logging.getLogger(__name__)

# Mechanism storage index = mechid * GLOBAL_MAX_SUBNET_COUNT + netuid (SDK settings).
_MECH_STRIDE = 4096
SIM_SPEC_VERSION = 400
SIM_FAST_BLOCK_TIME = 0.25


class SimUnsupported(ChainError):
    """The SDK asked the simulated chain for something it does not model."""


@dataclass(frozen=True)
class SimCall:
    """A composed call: what ``compose`` returns and ``submit`` receives."""

    call_module: str
    call_function: str
    call_args: dict[str, Any] = field(default_factory=dict)

    @property
    def function(self) -> str:
        return self.call_function

    @property
    def params(self) -> dict[str, Any]:
        return self.call_args

    @property
    def value(self) -> dict[str, Any]:
        """The decoded-call dict shape the SDK's fee filters inspect."""
        args = [{"name": k, "value": v} for k, v in self.call_args.items()]
        return {"call_module": self.call_module, "call_function": self.call_function, "call_args": args}


class SimSubstrate:
    """In-process chain access backed by a shared SQLite chain file."""

    def __init__(self, state: SimChainState):
        self.state = state
        self.token_symbols: dict[int, str] = {}
        self._queries: dict[tuple[str, str], Callable[[list], Any]] = {
            ("SubtensorModule", "Uids"): self._q_uids,
            ("SubtensorModule", "Keys"): self._q_keys,
            ("SubtensorModule", "Owner"): lambda p: self.state.coldkey_of(str(p[0])),
            ("SubtensorModule", "NetworksAdded"): lambda p: self.state.subnet(int(p[0])) is not None,
            ("SubtensorModule", "SubnetworkN"): lambda p: len(self.state.neurons(int(p[0]))),
            ("SubtensorModule", "Tempo"): lambda p: self._subnet_field(p, "tempo"),
            ("SubtensorModule", "CommitRevealWeightsEnabled"): lambda p: self._subnet_field(
                p, "commit_reveal"
            ),
            ("SubtensorModule", "WeightsSetRateLimit"): lambda p: self._subnet_field(p, "weights_rate_limit"),
            ("SubtensorModule", "MinAllowedWeights"): lambda p: self._subnet_field(p, "min_allowed_weights"),
            ("SubtensorModule", "MaxWeightsLimit"): lambda p: self._subnet_field(p, "max_weights_limit"),
            ("SubtensorModule", "WeightsVersionKey"): lambda p: self._subnet_field(p, "weights_version_key"),
            ("SubtensorModule", "MaxAllowedUids"): lambda p: self._subnet_field(p, "max_uids"),
            ("SubtensorModule", "SubnetEpochConsensus"): lambda p: "Yuma",
            ("SubtensorModule", "LastUpdate"): self._q_last_update,
            ("SubtensorModule", "ValidatorPermit"): lambda p: self._column(p, lambda n: n.validator_permit),
            ("SubtensorModule", "Active"): lambda p: self._column(p, lambda n: True),
            ("SubtensorModule", "Axons"): self._q_axon,
            ("SubtensorModule", "AssociatedEvmAddress"): self._q_evm_key,
        }

    # Display / lifecycle ----------------------------------------------------------

    def balance(self, rao: int, netuid: int = 0) -> Balance:
        return Balance(int(rao), netuid, self.token_symbols.get(netuid) if netuid else None)

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # Chain head -------------------------------------------------------------------

    async def block_hash(self, block: int | None = None) -> str:
        number = self.state.block() if block is None else int(block)
        return _hash_of(number)

    async def block_number(self) -> int:
        return self.state.block()

    async def finalized_block_number(self) -> int:
        return self.state.block()

    async def block_time(self) -> float:
        """The configured block time; below 1 s the SDK's fast-block value (0.25) is reported."""
        return self.state.block_time if self.state.block_time >= 1.0 else SIM_FAST_BLOCK_TIME

    async def spec_version(self) -> int:
        return SIM_SPEC_VERSION

    # Storage ----------------------------------------------------------------------

    async def query(
        self, module: str, storage_function: str, params: list | None = None, block_hash: str | None = None
    ) -> Any:
        handler = self._queries.get((module, storage_function))
        if handler is None:
            raise SimUnsupported(f"simulated chain does not model storage {module}.{storage_function}")
        return handler(list(params or []))

    async def query_batch(
        self, module: str, storage_function: str, param_sets: list[list], block_hash: str | None = None
    ) -> list[Any]:
        return [await self.query(module, storage_function, params) for params in param_sets]

    async def map_has_entries(
        self, module: str, storage_function: str, params: list, block_hash: str | None = None
    ) -> bool:
        return bool(await self.query_map(module, storage_function, params))

    async def query_map(
        self, module: str, storage_function: str, params: list | None = None, block_hash: str | None = None
    ) -> list[tuple[Any, Any]]:
        params = list(params or [])
        key = (module, storage_function)
        if key == ("SubtensorModule", "Weights"):
            netuid = _netuid_of_index(int(params[0]))
            return list(self.state.weights(netuid).items())
        if key == ("SubtensorModule", "Uids"):
            return [(n.hotkey, n.uid) for n in self.state.neurons(int(params[0]))]
        if key == ("SubtensorModule", "NetworksAdded"):
            return [(netuid, True) for netuid in self.state.netuids()]
        if key == ("SubtensorModule", "TokenSymbol"):
            # Raising keeps the SDK from writing this label to its on-disk symbol cache.
            raise SimUnsupported("simulated chain has no token symbols")
        if key in (("Commitments", "CommitmentOf"), ("Commitments", "RevealedCommitments")):
            return []
        raise SimUnsupported(f"simulated chain does not model storage map {module}.{storage_function}")

    async def runtime_call(self, api: str, method: str, params: list, block_hash: str | None = None) -> Any:
        if (api, method) == ("SubnetInfoRuntimeApi", "get_metagraph"):
            return self._metagraph(int(params[0]))
        raise SimUnsupported(f"simulated chain does not model runtime API {api}.{method}")

    async def constant(self, module: str, name: str) -> Any:
        if (module, name) == ("Aura", "SlotDuration"):
            return int(await self.block_time() * 1000)
        raise SimUnsupported(f"simulated chain does not model constant {module}.{name}")

    # Calls ------------------------------------------------------------------------

    async def compose(self, call: Any) -> SimCall:
        module, function, params = call
        return SimCall(module, function, dict(params))

    async def estimate_fee(self, call: Any, keypair: Any) -> Balance:
        return Balance.from_rao(0)

    async def estimate_weight(self, call: Any, keypair: Any) -> dict:
        return {"ref_time": 0, "proof_size": 0}

    async def account_next_index(self, address: str) -> int:
        return 0

    async def submit(
        self,
        call: SimCall,
        keypair: Any,
        *,
        nonce: int | None = None,
        period: int | None = None,
        wait_for_inclusion: bool = True,
        wait_for_finalization: bool = True,
    ) -> ExtrinsicResult:
        block = self.state.block()
        signer = str(keypair.ss58_address)
        try:
            self._dispatch(call, signer)
        except SimDispatchError as error:
            log.info(
                "sim chain rejected %s.%s signer=%s: %s",
                call.call_module,
                call.call_function,
                signer,
                error.name,
            )
            return ExtrinsicResult(
                success=False,
                message=error.message,
                block_hash=_hash_of(block),
                error=ChainError(error.message, error.name),
            )
        log.debug(
            "sim chain applied %s.%s signer=%s block=%d", call.call_module, call.call_function, signer, block
        )
        return ExtrinsicResult(
            success=True,
            message="Success",
            block_hash=_hash_of(block),
            extrinsic_id=f"{block}-0001",
            fee=Balance.from_rao(0),
        )

    def _dispatch(self, call: SimCall, signer: str) -> None:
        args = call.call_args
        if (call.call_module, call.call_function) == ("SubtensorModule", "serve_axon"):
            axon = AxonUpdate(
                ip=int(args["ip"]),
                port=int(args["port"]),
                ip_type=int(args["ip_type"]),
                protocol=int(args["protocol"]),
                version=int(args["version"]),
            )
            self.state.serve_axon(int(args["netuid"]), signer, axon)
        elif (call.call_module, call.call_function) == ("SubtensorModule", "associate_evm_key"):
            signature = args["signature"]
            if isinstance(signature, str):
                signature = bytes.fromhex(signature.removeprefix("0x"))
            self.state.associate_evm_key(
                int(args["netuid"]),
                signer,
                str(args["evm_key"]),
                int(args["block_number"]),
                bytes(signature),
            )
        elif (call.call_module, call.call_function) in (
            ("SubtensorModule", "set_mechanism_weights"),
            ("SubtensorModule", "set_weights"),
        ):
            if int(args.get("mecid", 0)) != 0:
                raise SimDispatchError("MechanismDoesNotExist", "the simulated chain has only mechanism 0")
            self.state.set_weights(
                int(args["netuid"]),
                signer,
                [int(d) for d in args["dests"]],
                [int(w) for w in args["weights"]],
                int(args["version_key"]),
            )
        else:
            raise SimUnsupported(
                f"simulated chain does not model call {call.call_module}.{call.call_function}"
            )

    # Helpers ----------------------------------------------------------------------

    def _subnet_field(self, params: list, name: str) -> Any:
        subnet = self.state.subnet(int(params[0]))
        return None if subnet is None else getattr(subnet, name)

    def _column(self, params: list, pick: Callable) -> list:
        return [pick(n) for n in self.state.neurons(int(params[0]))]

    def _q_uids(self, params: list) -> int | None:
        return self.state.uid_of(int(params[0]), str(params[1]))

    def _q_keys(self, params: list) -> str | None:
        netuid, uid = int(params[0]), int(params[1])
        for neuron in self.state.neurons(netuid):
            if neuron.uid == uid:
                return neuron.hotkey
        return None

    def _q_evm_key(self, params: list) -> tuple[str, int] | None:
        return self.state.evm_keys(int(params[0])).get(int(params[1]))

    def _q_last_update(self, params: list) -> list[int]:
        return [n.last_update for n in self.state.neurons(_netuid_of_index(int(params[0])))]

    def _q_axon(self, params: list) -> dict | None:
        netuid, hotkey = int(params[0]), str(params[1])
        for n in self.state.neurons(netuid):
            if n.hotkey == hotkey and n.axon_ip:
                return _axon_dict(n) | {"block": 0, "placeholder1": 0, "placeholder2": 0}
        return None

    def _metagraph(self, netuid: int) -> dict | None:
        subnet = self.state.subnet(netuid)
        if subnet is None:
            return None
        neurons = self.state.neurons(netuid)
        block = self.state.block()
        zeros = [0] * len(neurons)
        owner = neurons[0] if neurons else None
        return {
            "netuid": netuid,
            "name": list(b"compute-sim"),
            "symbol": list(b"\xce\xb1"),
            "identity": None,
            "network_registered_at": subnet.registered_at,
            "owner_hotkey": owner.hotkey if owner else "",
            "owner_coldkey": owner.coldkey if owner else "",
            "block": block,
            "tempo": subnet.tempo,
            "last_step": block - block % subnet.tempo,
            "blocks_since_last_step": block % subnet.tempo,
            "num_uids": len(neurons),
            "max_uids": subnet.max_uids,
            "hotkeys": [n.hotkey for n in neurons],
            "coldkeys": [n.coldkey for n in neurons],
            "identities": [None] * len(neurons),
            "axons": [_axon_dict(n) for n in neurons],
            "active": [True] * len(neurons),
            "validator_permit": [n.validator_permit for n in neurons],
            "last_update": [n.last_update for n in neurons],
            "block_at_registration": [n.registered_at for n in neurons],
            "pruning_score": zeros,
            "rank": zeros,
            "trust": zeros,
            "consensus": zeros,
            "incentives": zeros,
            "dividends": zeros,
            "emission": zeros,
            "alpha_stake": [n.stake_rao for n in neurons],
            "tao_stake": zeros,
            "total_stake": [n.stake_rao for n in neurons],
            "tao_in": 0,
            "alpha_in": 0,
        }


def _axon_dict(neuron: Any) -> dict:
    return {
        "ip": neuron.axon_ip,
        "port": neuron.axon_port,
        "ip_type": neuron.axon_ip_type,
        "protocol": neuron.axon_protocol,
        "version": neuron.axon_version,
    }


def _hash_of(block: int) -> str:
    return "0x" + format(block, "064x")


def _netuid_of_index(storage_index: int) -> int:
    if storage_index >= _MECH_STRIDE:
        raise SimUnsupported("the simulated chain has only mechanism 0")
    return storage_index
