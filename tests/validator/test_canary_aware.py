"""A miner that serves validators and canaries but refuses real renters, played with its best
variant.

Played for real: four miners on 127.0.0.1 (signed app, embedded backend, real SSH); four renters
rent through the real ``register.py`` (the operator CLI, each with its own registered hotkey); the
validator's ``RoundLoop`` runs its canaries through the same operator service, signed by an
operator identity registered as an ordinary renter under a coldkey of its own and leaving from
its own address (``--validator.canary_source``: 127.0.0.2 here).

The miners: an honest open one; the canary-aware cheater, which looks up every renter's coldkey on
the metagraph and serves every key on a validator's coldkey (the validator's hotkey and any
operator key registered beside it), every request from an address validation leases came from,
and anything shaped like the old canary, and says "no capacity" to everyone else (before:
availability 1.00 after three rounds of canaries while it refused 4 of 4 real renters); one that
says "no capacity" to every renter (the comparison); and an honest miner with the default access
policy (validators only), which refuses ordinary renters openly, by policy, for everyone to see.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
from pathlib import Path

import bittensor as bt
import pytest
from validator_helpers import Miner, port_block, register_and_serve, validator_context

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.chain import connect
from compute.localnet.cheaters import (
    CanaryAwareManager,
    looks_like_a_canary,
    on_validator_coldkeys,
    with_caller_address,
)
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.operator import main as register_main
from compute.protocol import AllocateRequest, Requirements
from compute.store import ValidatorStore
from compute.transport import AccessPolicy, KeyWallet, ServerLimits, serve_in_thread
from compute.validator import CanaryTiming, Oversight, RoundLoop, canary_identities, chain_block_source

RENTERS = 4
ROUNDS = 3
CANARY_SOURCE = "127.0.0.2"  # the operator identity's own address (the validator tests from 127.0.0.1)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def start(
    tmp_path: Path, make_wallet, name: str, manager_type=AllocationManager, policy=None, **kwargs
) -> Miner:
    wallet = make_wallet(name)
    data = tmp_path / name
    backend = EmbeddedBackend(data, bind_host="127.0.0.1", port_range=port_block())
    limits = ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10)
    manager = manager_type(LeaseStore(data / "leases.db"), backend, [], limits, **kwargs)
    keypair = KeyWallet.from_wallet(wallet)
    specs = fixed_specs([])
    app = build_miner_app(keypair, policy, manager, lambda: specs, ServerLimits(rate_per_s=100, burst=100))
    server = serve_in_thread(with_caller_address(app), "127.0.0.1", 0)
    miner = Miner(name, f"127.0.0.1:{server.port}", keypair.ss58, wallet, manager, backend)
    miner.server = server  # type: ignore[attr-defined]
    return miner


def register_py(chain_path: Path, wallet: bt.Wallet, data_dir: Path, *command: str) -> tuple[int, dict]:
    """One ``register.py ... --json`` run, as the renter types it."""
    out = io.StringIO()
    code = register_main(
        [
            *("--subtensor.network", f"sim:{chain_path}", "--netuid", "27", "--json"),
            *(
                "--wallet.name",
                wallet.name,
                "--wallet.hotkey",
                wallet.hotkey_str,
                "--wallet.path",
                wallet.path,
            ),
            *("--register.data_dir", str(data_dir)),
            *command,
        ],
        stdout=out,
    )
    return code, json.loads(out.getvalue())


def rent_and_release(chain_path: Path, renter: bt.Wallet, uid: int, data_dir: Path) -> str:
    """``register.py allocate --uid N`` (register.py's defaults: one hour, 1 CPU, 1 GiB, 5 GB), then
    ``deallocate``: "served", "no capacity" (the miner says it is rented) or "refused" (its access
    policy turns this hotkey away, as ``register.py resources`` shows every renter)."""
    code, answer = register_py(chain_path, renter, data_dir, "allocate", "--uid", str(uid))
    if code != 0:
        error = answer["error"]
        if error["code"] == "no_matching_machine":
            return "no capacity"
        assert error["code"] == "miner_offline" and "(forbidden)" in error["message"], error
        return "refused"
    lease = answer["lease"]["lease_id"]
    assert register_py(chain_path, renter, data_dir, "deallocate", lease)[0] == 0
    return "served"


@pytest.fixture
def market(tmp_path: Path, sim_chain, make_wallet, validator_client):
    path, state = sim_chain
    vwallet = validator_client.wallet_obj
    validator = vwallet.hotkey.ss58_address
    state.register(validator, vwallet.coldkeypub.ss58_address, 5000.0, True)
    # the validator's operator identity: an ordinary renter on a coldkey of its own
    operator = make_wallet("operator")
    state.register(operator.hotkey.ss58_address, operator.coldkeypub.ss58_address, 1.0, False)
    # what it used to be: a hotkey of the validator's wallet (on the validator's coldkey)
    linked = bt.Wallet(name=vwallet.name, hotkey="operator", path=vwallet.path)
    linked.create_new_hotkey(suppress=True, overwrite=True)
    state.register(linked.hotkey.ss58_address, linked.coldkeypub.ss58_address, 1.0, False)
    renters = [make_wallet(f"renter{i}") for i in range(RENTERS)]
    for renter in renters:
        state.register(renter.hotkey.ss58_address, renter.coldkeypub.ss58_address, 1.0, False)
    chain = connect(f"sim:{path}", 27)
    policy = AccessPolicy(chain.metagraph, min_stake=0.0, require_permit=True)  # the default gates
    policy.load()
    miners = {
        "honest": start(tmp_path, make_wallet, "honest"),
        "validators-only": start(tmp_path, make_wallet, "validators-only", policy=policy),
        "canary-aware": start(  # the best variant: the chain lookup and the path
            tmp_path,
            make_wallet,
            "canary-aware",
            CanaryAwareManager,
            validators=lambda: on_validator_coldkeys(chain.metagraph()),
            by_address=True,
        ),
        "refuses-all": start(tmp_path, make_wallet, "refuses-all", CanaryAwareManager, refuse_all=True),
    }
    uids = {name: register_and_serve(path, state, miner) for name, miner in miners.items()}
    yield path, operator, linked, renters, miners, uids
    for miner in miners.values():
        miner.server.stop()  # type: ignore[attr-defined]
    chain.close()


@pytest.mark.slow
async def test_canary_aware_miner_loses_availability_and_refusing_everyone_loses_more(
    tmp_path: Path, market, validator_client
) -> None:
    path, operator, linked, renters, miners, uids = market
    # 1. the real renters, through register.py: the cheaters turn every one of them away
    answers = {
        name: [await asyncio.to_thread(rent_and_release, path, r, uid, tmp_path / r.name) for r in renters]
        for name, uid in uids.items()
    }
    assert answers == {
        "honest": ["served"] * RENTERS,
        "validators-only": ["refused"] * RENTERS,  # openly, by policy
        "canary-aware": ["no capacity"] * RENTERS,  # "rented": a lie to the renters it admits
        "refuses-all": ["no capacity"] * RENTERS,
    }
    old_canary = AllocateRequest(  # what the canary-aware miner was built to recognise first
        requirements=Requirements(cpu_count=1, memory_gb=1.0, disk_gb=1.0), duration_s=60, ssh_public_key=KEY
    )
    assert looks_like_a_canary(old_canary)
    # 2. the validator's rounds: canaries through the operator service, signed by the operator identity
    chain = connect(f"sim:{path}", 27)
    store = ValidatorStore(tmp_path / "validator.db")
    wallets = Path(operator.path)
    ours = canary_identities(("operator/default",), "", wallets, tmp_path / "ids", CANARY_SOURCE)
    # and a hotkey of the validator's own wallet (on its coldkey), which the desk must not use
    identities = ours + canary_identities(
        ("operator",), validator_client.wallet_obj.name, wallets, tmp_path / "ids"
    )
    try:
        oversight = Oversight(
            canary_rate=1.0,
            rng=random.Random(23),
            canary_renters=identities,
            canary_dir=tmp_path / "canary",
            canary_timing=CanaryTiming.for_dwell(0.6),
        )
        ctx = validator_context(chain, store, validator_client, oversight=oversight)
        loop = RoundLoop(ctx, interval_blocks=1, concurrency=4, step_timeout=180, show_table=False)
        for _ in range(ROUNDS):
            await loop.run_step(await chain_block_source(chain)())
        last = {r.uid: r for r in store.results(ROUNDS)}
    finally:
        store.close()
        chain.close()
        for identity in identities:
            await identity.aclose()
    availability = {name: last[uid].availability for name, uid in uids.items()}
    # honest: every canary served; canary-aware: none of them (the identity is on no validator's
    # coldkey and comes from its own address); refusing everyone: none either; the validators-only
    # miner refuses the operator identity openly (not counted) and serves the validator's own key
    assert availability["canary-aware"] < 0.7, availability
    assert availability == pytest.approx(
        {"honest": 1.0, "validators-only": 1.0, "canary-aware": 1 / 4, "refuses-all": 1 / 4}
    )
    aware = miners["canary-aware"].manager
    assert operator.hotkey.ss58_address in aware.refused and validator_client.hotkey not in aware.refused
    assert linked.hotkey.ss58_address not in {owner for owner, _, _ in aware.callers}  # never used
    paths = {
        purpose: {address for _, address, p in aware.callers if p == purpose}
        for purpose in ("validation", "rental")
    }
    assert paths == {"validation": {"127.0.0.1"}, "rental": {"127.0.0.1", CANARY_SOURCE}}  # the renters'
    canaries = {address for owner, address, _ in aware.callers if owner == operator.hotkey.ss58_address}
    assert canaries == {CANARY_SOURCE}
    for name in ("canary-aware", "refuses-all"):
        reasons = last[uids[name]].reasons
        assert any(reason.startswith("availability x") for reason in reasons), reasons
    assert any(r.startswith("canary refused") for r in last[uids["refuses-all"]].reasons)
    assert all(last[uid].ok for uid in uids.values())  # every PoG passed: the factor alone lowers them
    for miner in miners.values():
        assert await miner.backend.running() == set()  # every canary released
    # why an identity on the validator's coldkey is never used: the cheater serves it
    served = await asyncio.to_thread(
        rent_and_release, path, linked, uids["canary-aware"], tmp_path / "linked"
    )
    assert served == "served"
