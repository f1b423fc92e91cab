"""A small subnet for the collateral stories, all real and all on 127.0.0.1.

A simulated chain (validators with their own stakes, a renter, miners); the local EVM served over
JSON-RPC with the real contracts over the precompile doubles, kept in step with the simulated chain
(``compute.collateral.devchain.serve_local``); EVM keys associated through the SDK's own ``AssociateEvmKey`` intent on
the simulated chain; the miner that kills rentals (``compute.localnet.lease_killer``) serving its
real API; and each validator's real collateral parts (``build_collateral``: credit, desk, evidence
surface) over its own store. Only the PoG round is not run: each validator's store holds the
verified result a round would have written for the miner.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bittensor as bt

from compute.chain import SimChainState, connect
from compute.collateral.chain import CollateralClient
from compute.collateral.devchain import LocalEvm, serve_local
from compute.collateral.settings import CollateralSettings
from compute.localnet.lease_killer import build as build_killer
from compute.operator import main as register_main
from compute.store import PogResult, ScoreUpdate, ValidatorStore
from compute.transport import serve_in_thread
from compute.validator.collateral.wiring import CollateralParts, build_collateral

NETUID = 27
TAO = 10**18
STAKES = (10_000.0, 6_667.0, 5_000.0)  # 46 %, 31 %, 23 % of validator stake (the renter adds 1 000)


@dataclass
class Validator:
    wallet: bt.Wallet
    uid: int
    evm: Any
    store: ValidatorStore
    parts: CollateralParts | None = None

    @property
    def url(self) -> str:
        assert self.parts is not None and self.parts.surface is not None
        return self.parts.surface.url


@dataclass
class Story:
    root: Path
    state: SimChainState
    evm: LocalEvm
    validators: list[Validator]
    renter: bt.Wallet
    renter_evm: Any
    miner: bt.Wallet
    miner_uid: int
    miner_evm: Any
    servers: list[Any] = field(default_factory=list)
    chains: list[Any] = field(default_factory=list)
    killer: Any = None

    @property
    def chain_path(self) -> Path:
        return self.root / "chain.db"

    def contract(self, account: Any = None) -> CollateralClient:
        from web3 import Web3

        return CollateralClient(Web3(Web3.HTTPProvider(self.evm.url)), self.evm.address, account)

    def register(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
        """``register.py ARGS --json`` in process, as the renter."""
        flags = [
            "--subtensor.network",
            f"sim:{self.chain_path}",
            "--netuid",
            str(NETUID),
            "--wallet.name",
            "renter",
            "--wallet.path",
            str(self.root / "wallets"),
            "--register.data_dir",
            str(self.root / "register"),
            "--register.timeout",
            "20",
        ]
        out = io.StringIO()
        saved = {k: os.environ.get(k) for k in env or {}}
        os.environ.update(env or {})
        try:
            code = register_main([*flags, *args, "--json"], stdout=out, stderr=io.StringIO())
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        return code, json.loads(out.getvalue())

    def play(self, until, timeout_s: float = 60.0, then_s: float = 0.0) -> bool:  # noqa: ANN001
        """Run every validator's desk step until ``until()`` holds (True) or the time is up, then
        ``then_s`` more seconds of steps."""

        async def go() -> bool:
            done = await self._steps(until, timeout_s)
            await self._steps(lambda: False, then_s)
            return done

        return asyncio.run(go())

    async def _steps(self, until, timeout_s: float) -> bool:  # noqa: ANN001 - a predicate
        deadline = time.monotonic() + timeout_s
        block = 0
        while time.monotonic() < deadline:
            block += 1
            for v in self.validators:
                assert v.parts is not None
                await v.parts.desk.run_step(block)
            if until():
                return True
            await asyncio.sleep(0.2)
        return False

    def close(self) -> None:
        for v in self.validators:
            if v.parts is not None:
                v.parts.close()
            v.store.close()
        for server in self.servers:
            server.stop()
        for chain in self.chains:
            chain.close()
        self.evm.stop()


def _wallet(root: Path, name: str) -> bt.Wallet:
    wallet = bt.Wallet(name=name, hotkey="default", path=str(root / "wallets"))
    wallet.create_new_coldkey(use_password=False, suppress=True, overwrite=True)
    wallet.create_new_hotkey(suppress=True, overwrite=True)
    return wallet


def verified(uid: int, hotkey: str, round_id: int = 1) -> PogResult:
    """What a round writes for a CPU machine it verified (the demo's miners have no GPU)."""
    return PogResult(
        round_id, uid, hotkey, ok=True, sample=0.01, models=("cpu",), gpu_count=0, created=time.time()
    )


def record_verified(store: ValidatorStore, result: PogResult, score: float = 0.01) -> None:
    record = store.begin_round(1)
    store.record_result(result)
    store.finish_round(record.round_id, [ScoreUpdate(result.uid, result.hotkey, score)])


def build_story(root: Path, kill_after_s: float = 1.0, deposit_tao: float = 1.0) -> Story:
    state = SimChainState.create(root / "chain.db", netuid=NETUID, block_time=1.0)
    chain = connect(f"sim:{root / 'chain.db'}", NETUID)
    evm = serve_local(NETUID)
    validators = []
    for index, stake in enumerate(STAKES):
        wallet = _wallet(root, f"validator{index + 1}")
        uid = state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, stake, True)
        account = evm.account()
        chain.associate_evm_key(wallet, account)  # the SDK's AssociateEvmKey, checked by the sim chain
        store = ValidatorStore(root / f"validator{index + 1}" / "validator.db")
        validators.append(Validator(wallet, uid, account, store))
    renter = _wallet(root, "renter")
    state.register(renter.hotkey.ss58_address, renter.coldkeypub.ss58_address, 1000.0, True)
    miner = _wallet(root, "killer")
    miner_uid = state.register(miner.hotkey.ss58_address, miner.coldkeypub.ss58_address, 10.0)
    miner_evm = evm.account()
    chain.associate_evm_key(miner, miner_evm)
    evm.mirror(state, NETUID)
    story = Story(root, state, evm, validators, renter, evm.account(1.0), miner, miner_uid, miner_evm)
    if deposit_tao:
        story.contract(miner_evm).deposit(int(deposit_tao * TAO))
    app = build_killer(root, "killer", miner, chain.metagraph, kill_after_s)
    server = serve_in_thread(app, "127.0.0.1", 0)
    story.servers.append(server)
    chain.serve(miner, "127.0.0.1", server.port)
    story.killer = app
    story.chains.append(chain)  # the killer's access policy reads the metagraph through it
    return story


def associate(story: Story, wallet: bt.Wallet, account: Any) -> None:
    """``wallet``'s hotkey speaks for ``account`` on the subnet (the SDK's AssociateEvmKey), mirrored."""
    chain = connect(f"sim:{story.chain_path}", NETUID)
    try:
        chain.associate_evm_key(wallet, account)
    finally:
        chain.close()
    story.evm.mirror(story.state, NETUID)


def permitted(
    story: Story, name: str, stake: float, coldkey_of: bt.Wallet | None = None
) -> tuple[bt.Wallet, Any]:
    """A new validator-permitted hotkey (on ``coldkey_of``'s coldkey if given) with an associated,
    funded EVM key: an attacker's extra signer."""
    wallet = bt.Wallet(name=name, hotkey="default", path=str(story.root / "wallets"))
    if coldkey_of is None:
        wallet.create_new_coldkey(use_password=False, suppress=True, overwrite=True)
        coldkey = wallet.coldkeypub.ss58_address
    else:
        coldkey = coldkey_of.coldkeypub.ss58_address
    wallet.create_new_hotkey(suppress=True, overwrite=True)
    story.state.register(wallet.hotkey.ss58_address, coldkey, stake, True)
    account = story.evm.account(5.0)
    associate(story, wallet, account)
    return wallet, account


def attacker_surface(story: Story, name: str) -> tuple[Any, str]:
    """An attacker's own evidence surface (a real book and surface on 127.0.0.1): (book, url)."""
    from compute.validator.collateral.book import CollateralBook
    from compute.validator.collateral.surface import build_surface

    book = CollateralBook(story.root / name / "collateral")
    server = serve_in_thread(build_surface(book), "127.0.0.1", 0)
    story.servers.append(server)
    return book, server.url


def start_desks(
    story: Story,
    dead_s: float = 2.0,
    only: tuple[int, ...] | None = None,
    keys: tuple[int, ...] | None = None,
    cheat_window: float = 86_400.0,
    extra_peers: tuple[str, ...] = (),
    results: list[PogResult] | None = None,
) -> None:
    """Each validator's real collateral parts, its surface on a free port, the others as peers.

    ``only``: the validators (indices) that run a desk at all; ``keys``: those holding an EVM key
    (the others check evidence but never attest); ``extra_peers``: surfaces every desk also reads
    (an attacker's); ``results``: what each validator's round verified of the miner (default: the
    CPU machine)."""
    from compute.localnet.processes import free_port

    for i, v in enumerate(story.validators):
        if only is not None and i not in only:
            v.store.close()
    story.validators = [v for i, v in enumerate(story.validators) if only is None or i in only]
    keys = tuple(range(len(story.validators))) if keys is None else keys
    ports = [free_port() for _ in story.validators]
    chain = connect(f"sim:{story.chain_path}", NETUID)
    story.chains.append(chain)
    for index, v in enumerate(story.validators):
        result = results[index] if results else verified(story.miner_uid, story.miner.hotkey.ss58_address)
        record_verified(v.store, result)
        others = tuple(f"http://127.0.0.1:{p}" for j, p in enumerate(ports) if j != index) + extra_peers
        settings = CollateralSettings(
            rpc=story.evm.url,
            address=story.evm.address,
            port=ports[index],
            peers=others,
            dead_seconds=dead_s,
            probe_seconds=0.5,
            sync_seconds=0.5,
            cheat_window=cheat_window,
            evm_key_hex="0x" + bytes(v.evm.key).hex() if index in keys else None,
        )
        v.parts = build_collateral(
            settings,
            hotkey=v.wallet.hotkey,
            wallet_name=v.wallet.name,
            wallet_path=story.root / "wallets",
            data_dir=story.root / v.wallet.name,
            chain=chain,
            store=v.store,
        )
