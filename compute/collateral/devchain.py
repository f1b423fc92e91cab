"""A local EVM: eth-tester on py-evm, in process or served over JSON-RPC on 127.0.0.1.

Tests and the benchmark use :func:`local_chain` (web3 over ``EthereumTesterProvider``: the real
EVM of py-evm, real signed transactions and receipts, no node). The local demo, whose miners and
validators are separate processes, needs one chain they all reach: :func:`serve` puts the same
chain behind a JSON-RPC endpoint (``python -m compute collateral devchain``), so every process
talks to it through the bounded JSON-RPC provider (``compute.collateral.rpc``) exactly as it would
to subtensor's EVM RPC.

:func:`serve_local` does both for a whole local subnet: the served chain, the contracts deployed
over the precompile doubles, and a :class:`LocalEvm` whose ``mirror`` copies a simulated chain into
the doubles — each neuron's hotkey, stake and permit (what subtensor's metagraph precompile answers)
and each ``associate_evm_key`` record (what its UID-lookup precompile answers). That keeper is the
only part that is not subtensor's: on the real chain the precompiles read the runtime's state.

What it deliberately does not do: emulate subtensor's precompiles (the doubles in
contracts/test/Doubles.sol stand in for them) or persist state (the chain lives in memory).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from fastapi import FastAPI, Request, Response
from web3 import EthereumTesterProvider, Web3

from compute.collateral.chain import revert_bytes

logger = logging.getLogger(__name__)
_CAMEL = re.compile(r"_([a-z0-9])")
_SHORT_HEX = re.compile(r"^0x[0-9a-fA-F]{1,16}$")
_NUMERIC_KEYS = {
    "value",
    "gas",
    "gasPrice",
    "nonce",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "chainId",
    "type",
}


@dataclass
class LocalChain:
    """An in-process EVM with funded dev accounts."""

    w3: Web3
    provider: EthereumTesterProvider
    accounts: list[LocalAccount]

    def fund(self, address: str, wei: int) -> None:
        """Send ``wei`` from the first dev account (gas money and deposits for new keys)."""
        faucet = self.accounts[-1]
        tx: Any = {
            "from": faucet.address,
            "to": Web3.to_checksum_address(address),
            "value": wei,
            "gas": 21_000,
            "gasPrice": self.w3.eth.gas_price,
            "nonce": self.w3.eth.get_transaction_count(faucet.address, "pending"),
            "chainId": self.w3.eth.chain_id,
        }
        signed = faucet.sign_transaction(tx)
        self.w3.eth.wait_for_transaction_receipt(self.w3.eth.send_raw_transaction(signed.raw_transaction))

    def new_account(self, wei: int = 10**21) -> LocalAccount:
        account: LocalAccount = Account.create()
        self.fund(account.address, wei)
        return account

    def advance(self, seconds: int) -> None:
        """Move the chain's clock forward (the next block is stamped that much later)."""
        tester: Any = self.provider.ethereum_tester
        now = tester.get_block_by_number("pending")["timestamp"]
        tester.time_travel(int(now) + int(seconds))

    def now(self) -> int:
        tester: Any = self.provider.ethereum_tester
        return int(tester.get_block_by_number("pending")["timestamp"])


def local_chain() -> LocalChain:
    provider = EthereumTesterProvider()
    w3 = Web3(provider)
    tester: Any = provider.ethereum_tester
    keys = tester.backend.account_keys
    accounts = [Account.from_key(key.to_bytes()) for key in keys]
    return LocalChain(w3, provider, accounts)


# ------------------------------------------------------------------ JSON-RPC over HTTP


def _wire(value: Any) -> Any:
    """eth-tester's Python results in the JSON-RPC wire format web3's HTTP provider expects."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return hex(value)
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, dict):
        return {_CAMEL.sub(lambda m: m.group(1).upper(), str(k)): _wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_wire(v) for v in value]
    return value


class RpcHandler:
    """One JSON-RPC request at a time against the in-process chain (eth-tester is not thread-safe)."""

    def __init__(self, chain: LocalChain) -> None:
        self.chain = chain
        self._lock = threading.Lock()

    def handle(self, body: bytes) -> bytes:
        try:
            request = json.loads(body)
        except ValueError:
            return json.dumps(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
            ).encode()
        if isinstance(request, list):
            return json.dumps([self._one(r) for r in request]).encode()
        return json.dumps(self._one(request)).encode()

    def _one(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "invalid request"}}
        rid = request.get("id")
        with self._lock:
            try:
                params = [_python(p) for p in request.get("params") or []]
                if (
                    request["method"] in ("eth_call", "eth_estimateGas")
                    and params
                    and isinstance(params[0], dict)
                ):
                    if int(str(params[0].get("from") or "0x0"), 16) == 0:  # a read-only caller: a funded one
                        params[0] = {**params[0], "from": self.chain.accounts[0].address}
                reply = self.chain.provider.make_request(request["method"], params)
            except Exception as error:  # noqa: BLE001 - every failure is a JSON-RPC error for the caller
                data = revert_bytes(error)
                if data is not None:  # a revert: code 3 with its data, as geth and subtensor answer
                    reverted = {"code": 3, "message": "execution reverted", "data": "0x" + data.hex()}
                    return {"jsonrpc": "2.0", "id": rid, "error": reverted}
                return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": str(error)}}
        if "error" in reply:
            failure: Any = reply["error"]
            if not isinstance(failure, dict):
                failure = {"code": -32000, "message": str(failure)}
            return {"jsonrpc": "2.0", "id": rid, "error": _wire_error(failure)}
        return {"jsonrpc": "2.0", "id": rid, "result": _wire(reply.get("result"))}


def _python(param: Any) -> Any:
    """A wire parameter as eth-tester's provider takes it: quantities as ints."""
    if isinstance(param, str) and _SHORT_HEX.match(param):
        return int(param, 16)  # block numbers, counts, storage slots (never addresses or hashes)
    if isinstance(param, dict):
        return {k: int(v, 16) if k in _NUMERIC_KEYS and isinstance(v, str) else v for k, v in param.items()}
    return param


def _wire_error(error: dict[str, Any]) -> dict[str, Any]:
    out = {"code": int(error.get("code", -32000)), "message": str(error.get("message", ""))}
    if "data" in error:
        data = error["data"]
        out["data"] = data if isinstance(data, str) else _wire(data)
    return out


def rpc_app(chain: LocalChain) -> Any:
    """A FastAPI app answering JSON-RPC on ``POST /`` from ``chain`` (serve it on 127.0.0.1 only)."""
    handler = RpcHandler(chain)
    app = FastAPI(title="compute local EVM", docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/")
    async def rpc(request: Request) -> Response:
        body = await request.body()
        return Response(content=handler.handle(body), media_type="application/json")

    return app


# ------------------------------------------------------------------ a served local subnet EVM

TAO_WEI = 10**18


@dataclass
class LocalEvm:
    chain: LocalChain
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

    def mirror(self, state: Any, netuid: int) -> int:
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


def serve_local(
    netuid: int,
    rate_tao: float = 1.0,
    reclaim_delay_s: int | None = None,
    proposal_ttl_s: int | None = None,
    port: int = 0,
) -> LocalEvm:
    """The served chain with the contracts deployed (needs the ``collateral`` extra); the windows
    are the production defaults unless given (``compute.collateral.windows``)."""
    from compute.collateral.chain import CollateralConfig
    from compute.collateral.deploy import deploy_stack
    from compute.collateral.rpc import RpcLimits, bounded_web3
    from compute.collateral.windows import DEFAULT_PROPOSAL_TTL_S, DEFAULT_RECLAIM_DELAY_S
    from compute.transport import serve_in_thread

    chain = local_chain()
    config = CollateralConfig(
        rate_per_gpu_day=int(rate_tao * TAO_WEI),
        min_deposit=TAO_WEI // 10,
        reclaim_delay_s=reclaim_delay_s or DEFAULT_RECLAIM_DELAY_S,
        proposal_ttl_s=proposal_ttl_s or DEFAULT_PROPOSAL_TTL_S,
    )
    stack = deploy_stack(chain.w3, chain.accounts[0], config, netuid, doubles=True)
    server = serve_in_thread(rpc_app(chain), "127.0.0.1", port)
    # From now on every caller, this process included, goes through the served endpoint: eth-tester
    # is not thread-safe and the endpoint answers one request at a time.
    served = bounded_web3(server.url, RpcLimits(deadline_s=60))
    chain.w3 = served
    assert stack.mirror is not None
    stack.mirror.w3 = served
    logger.info(
        "local EVM at %s: Collateral %s (%.2f TAO per GPU-day)", server.url, stack.collateral, rate_tao
    )
    return LocalEvm(chain, stack, server)
