"""``BtChain``: the subnet's chain access over ``bt.Subtensor``, for live and simulated chains.

One implementation serves both: ``connect("finney", 27)`` wraps ``bt.Subtensor("finney")``
and ``connect("sim:/tmp/chain.db", 27)`` wraps ``bt.Subtensor(substrate=SimSubstrate(...))``,
so the SDK's own ``ServeAxon``/``SetWeights`` intents (plan, preflight, u16
normalisation, commit-reveal selection) and ``subnets.metagraph`` run in both cases.

The client runs the awaited (async) SDK client on a private event-loop thread and
bounds every call with ``asyncio.wait_for``: a dead or silent endpoint ends in
:class:`ChainUnavailable` after the timeout, never a hang, and the abandoned
coroutine is cancelled. The methods are blocking; async callers use
``asyncio.to_thread``. It deliberately offers only what the neurons need; use the
SDK directly for anything else (staking, registration with burn, ...).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, TypeVar, cast

import bittensor as bt
from bittensor.result import BittensorError, ErrorCode, RpcConnectionError

from .sim import SimChainError, SimChainState, SimSubstrate
from .types import ChainError, ChainUnavailable, MetagraphSnapshot, NeuronInfo, NotRegistered, RateLimited

log = logging.getLogger(__name__)
T = TypeVar("T")

NAMED_NETWORKS = ("finney", "test", "local", "archive", "devnet")
SIM_PREFIX = "sim:"
SIM_LABEL = "ws://sim.invalid"
# total_stake is the subnet's stake weight, alpha-denominated under dynamic TAO:
# read it as a plain number of whole units (1e9 rao each), never through Balance.tao.
_RAO_PER_UNIT = 1e9


class BtChain:
    """Blocking, time-bounded chain access for one subnet (implements ``compute.chain.Chain``)."""

    def __init__(
        self,
        subtensor: bt.Subtensor,
        netuid: int,
        *,
        label: str,
        read_timeout: float = 30.0,
        write_timeout: float = 120.0,
        connect_timeout: float = 20.0,
    ):
        self.netuid = int(netuid)
        self.label = label
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.connect_timeout = connect_timeout
        self._subtensor = subtensor
        self._client: Any = None
        self._connect_lock = threading.Lock()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="compute-chain", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"BtChain(network={self.label!r}, netuid={self.netuid})"

    # Plumbing ---------------------------------------------------------------------

    def _submit(self, coro: Awaitable[T], timeout: float, what: str) -> T:
        if self._closed:
            raise ChainError(f"{self!r} is closed")
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), self._loop)
        try:
            return future.result(timeout + 5.0)
        except (TimeoutError, FutureTimeout) as error:
            future.cancel()
            raise ChainUnavailable(f"{what} on {self.label} got no answer within {timeout:.0f}s") from error
        except Exception as error:
            raise _translate(error, what, self.label) from error

    def _ensure_client(self) -> Any:
        with self._connect_lock:
            if self._client is None:
                self._client = self._submit(self._aconnect(), self.connect_timeout, "connect")
                log.info("chain connected network=%s netuid=%d", self.label, self.netuid)
            return self._client

    async def _aconnect(self) -> Any:
        return await self._subtensor

    def _call(self, make: Callable[[Any], Awaitable[T]], what: str, *, write: bool = False) -> T:
        client = self._ensure_client()
        return self._submit(make(client), self.write_timeout if write else self.read_timeout, what)

    # Reads ------------------------------------------------------------------------

    def block(self) -> int:
        return int(self._call(lambda c: c.block(), "block"))

    def block_time(self) -> float:
        """Seconds per block as the chain reports it (12 on finney; the sim chain's setting)."""
        return float(self._call(lambda c: c.block_time(), "block_time"))

    def metagraph(self) -> MetagraphSnapshot:
        graph = self._call(lambda c: c.subnets.metagraph(self.netuid, commitments=False), "metagraph")
        if graph is None:
            raise ChainError(f"subnet {self.netuid} does not exist on {self.label}")
        neurons = tuple(
            NeuronInfo(
                uid=int(n.uid),
                hotkey=str(n.hotkey),
                coldkey=str(n.coldkey),
                stake=n.total_stake.rao / _RAO_PER_UNIT,
                validator_permit=bool(n.validator_permit),
                axon=n.axon,
                active=bool(n.active),
                last_update=int(n.last_update),
            )
            for n in graph.neurons
        )
        return MetagraphSnapshot(netuid=self.netuid, block=int(graph.block), neurons=neurons)

    def is_registered(self, hotkey: str) -> bool:
        uid = self._call(
            lambda c: c.query(bt.storage.SubtensorModule.Uids, [self.netuid, hotkey]), "is_registered"
        )
        return uid is not None

    def weights(self, uid: int) -> dict[int, float]:
        """The weights ``uid`` has set, normalised to sum 1 (``{}`` when none)."""
        rows = self._call(lambda c: c.read("weights", netuid=self.netuid), "weights")
        return {int(k): float(v) for k, v in (rows.get(int(uid)) or {}).items()}

    # Writes -----------------------------------------------------------------------

    def serve(self, wallet: Any, ip: str, port: int) -> None:
        """Publish ``ip:port`` for the wallet's hotkey; a no-op when the chain already shows it."""
        address = ipaddress.ip_address(ip)
        if not 0 < int(port) < 65536:
            raise ValueError(f"port must be in 1..65535, got {port}")
        endpoint = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        hotkey = wallet.hotkey.ss58_address
        current = self.metagraph().by_hotkey().get(hotkey)
        if current is None:
            raise NotRegistered(f"hotkey {hotkey} is not registered on netuid {self.netuid} ({self.label})")
        if current.axon == endpoint:
            log.info("axon already served uid=%d endpoint=%s", current.uid, endpoint)
            return
        intent = bt.ServeAxon(netuid=self.netuid, ip=str(address), port=int(port))
        result = self._call(lambda c: c.execute(intent, wallet), "serve_axon", write=True)
        self._raise_for(result, "serve_axon")
        log.info("axon served uid=%d endpoint=%s", current.uid, endpoint)

    def set_weights(self, wallet: Any, weights: dict[int, float], version_key: int) -> None:
        """Submit ``{uid: weight}`` (relative values; the SDK normalises and quantises)."""
        if not weights:
            raise ValueError("weights are empty")
        clean: dict[int, float] = {}
        for uid, weight in weights.items():
            value = float(weight)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"weight for uid {uid} must be finite and >= 0, got {weight!r}")
            clean[int(uid)] = value
        intent = bt.SetWeights(netuid=self.netuid, weights=clean, version_key=int(version_key))
        result = self._call(lambda c: c.execute(intent, wallet), "set_weights", write=True)
        self._raise_for(result, "set_weights")
        log.info("weights set netuid=%d uids=%d version_key=%d", self.netuid, len(clean), version_key)

    def associate_evm_key(self, wallet: Any, account: Any) -> int:
        """Link the EVM ``account`` (an eth_account LocalAccount) to the wallet's hotkey on this
        subnet (``associate_evm_key``: signed by the hotkey, proven by the EVM key over the current
        block); the block the proof was made for. Rate-limited by the chain to once a day per neuron."""
        from bittensor.evm import association_proof

        hotkey = wallet.hotkey.ss58_address
        signature, block = association_proof(account, hotkey, self.block())
        intent = bt.AssociateEvmKey(
            netuid=self.netuid, evm_key=account.address, block_number=block, signature=signature
        )
        result = self._call(lambda c: c.execute(intent, wallet), "associate_evm_key", write=True)
        self._raise_for(result, "associate_evm_key")
        log.info("EVM key %s associated with hotkey=%s netuid=%d", account.address, hotkey, self.netuid)
        return block

    def _raise_for(self, result: Any, what: str) -> None:
        if not result.success:
            error = result.error or bt.ChainError(result.message or f"{what} failed")
            raise _translate(error, what, self.label)

    # Lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        if self._client is not None:
            try:
                self._submit(self._client.close(), 5.0, "close")
            except ChainError as error:
                log.warning("chain close failed network=%s: %s", self.label, error)
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> BtChain:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _translate(error: BaseException, what: str, label: str) -> ChainError:
    """Map SDK failures onto this package's errors (by ``ErrorCode``, never by message text)."""
    if isinstance(error, ChainError):
        return error
    if isinstance(error, RpcConnectionError):
        return ChainUnavailable(f"{what}: {label} unreachable: {error}")
    if isinstance(error, bt.ChainError):
        code = getattr(error, "code", None)
        if code == ErrorCode.NOT_REGISTERED:
            return NotRegistered(f"{what}: {error}")
        if code == ErrorCode.RATE_LIMITED:
            return RateLimited(f"{what}: {error}")
        return ChainError(f"{what}: {error}")
    if isinstance(error, (BittensorError, SimChainError, ValueError)):
        return ChainError(f"{what}: {error}")
    if isinstance(error, (ConnectionError, OSError)):
        return ChainUnavailable(f"{what}: {label} unreachable: {error}")
    return ChainError(f"{what}: unexpected {type(error).__name__}: {error}")


def connect(network: str, netuid: int, **timeouts: float) -> BtChain:
    """Chain access for ``netuid`` on ``network``.

    ``network`` is ``sim:/path/chain.db`` (simulated chain file), one of
    ``finney|test|local|archive|devnet``, or a ``ws://``/``wss://`` URL.
    ``timeouts`` may set ``read_timeout``, ``write_timeout`` and ``connect_timeout`` (seconds).
    Nothing is dialled until the first call.
    """
    if not isinstance(netuid, int) or not 0 <= netuid <= 65535:
        raise ChainError(f"netuid must be an integer in 0..65535, got {netuid!r}")
    network = (network or "").strip()
    if network.startswith(SIM_PREFIX):
        path = Path(network[len(SIM_PREFIX) :]).expanduser()
        try:
            state = SimChainState.open(path)
        except SimChainError as error:
            raise ChainError(str(error)) from error
        # SimSubstrate implements the part of the bt.Substrate protocol this project's calls reach.
        substrate = cast(bt.Substrate, SimSubstrate(state))
        subtensor = bt.Subtensor(SIM_LABEL, substrate=substrate)
        return BtChain(subtensor, netuid, label=f"sim:{path}", **timeouts)
    if network in NAMED_NETWORKS or network.startswith(("ws://", "wss://")):
        subtensor = bt.Subtensor(network, retry_forever=False)
        return BtChain(subtensor, netuid, label=network, **timeouts)
    raise ChainError(
        f"unknown network {network!r}: use sim:/path/chain.db, one of {', '.join(NAMED_NETWORKS)}, "
        "or a ws:// / wss:// URL"
    )
