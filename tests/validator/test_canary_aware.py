"""A miner that serves validators and canaries but refuses real renters.

Played for real: four miners on 127.0.0.1 (signed app, embedded backend, real SSH); four renters
rent through the real ``register.py`` (the operator CLI, each with its own registered hotkey); the
validator's ``RoundLoop`` runs its canaries through the same operator service, signed in turn by
its own hotkey and by an operator hotkey of its wallet registered as an ordinary renter.

The miners: an honest open one; the canary-aware cheater (serves validators' hotkeys and anything
shaped like the old canary, says "no capacity" to everyone else); one that says "no capacity" to
every renter (the comparison); and an honest miner with the default access policy (validators
only), which refuses ordinary renters openly, by policy, for everyone to see.
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
from compute.localnet.cheaters import CanaryAwareManager, looks_like_a_canary
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.operator import main as register_main
from compute.protocol import AllocateRequest, Requirements
from compute.store import ValidatorStore
from compute.transport import AccessPolicy, KeyWallet, ServerLimits, serve_in_thread
from compute.validator import CanaryRenter, CanaryTiming, Oversight, RoundLoop, chain_block_source

RENTERS = 4
ROUNDS = 2
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
    server = serve_in_thread(app, "127.0.0.1", 0)
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
    operator = bt.Wallet(name=vwallet.name, hotkey="operator", path=vwallet.path)  # the validator's
    operator.create_new_hotkey(suppress=True, overwrite=True)  # operator key: an ordinary renter
    state.register(operator.hotkey.ss58_address, operator.coldkeypub.ss58_address, 1.0, False)
    renters = [make_wallet(f"renter{i}") for i in range(RENTERS)]
    for renter in renters:
        state.register(renter.hotkey.ss58_address, renter.coldkeypub.ss58_address, 1.0, False)
    chain = connect(f"sim:{path}", 27)
    policy = AccessPolicy(chain.metagraph, min_stake=0.0, require_permit=True)  # the default gates
    policy.load()
    miners = {
        "honest": start(tmp_path, make_wallet, "honest"),
        "validators-only": start(tmp_path, make_wallet, "validators-only", policy=policy),
        "canary-aware": start(
            tmp_path, make_wallet, "canary-aware", CanaryAwareManager, validators=lambda: {validator}
        ),
        "refuses-all": start(tmp_path, make_wallet, "refuses-all", CanaryAwareManager, refuse_all=True),
    }
    uids = {name: register_and_serve(path, state, miner) for name, miner in miners.items()}
    yield path, operator, renters, miners, uids
    for miner in miners.values():
        miner.server.stop()  # type: ignore[attr-defined]
    chain.close()


@pytest.mark.slow
async def test_canary_aware_miner_loses_availability_and_refusing_everyone_loses_more(
    tmp_path: Path, market, validator_client
) -> None:
    path, operator, renters, miners, uids = market
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
    old_canary = AllocateRequest(  # what the canary-aware miner was built to recognise
        requirements=Requirements(cpu_count=1, memory_gb=1.0, disk_gb=1.0), duration_s=60, ssh_public_key=KEY
    )
    assert looks_like_a_canary(old_canary)
    # 2. the validator's rounds: canaries through the operator service, signed by two renter identities
    operator_client = KeyWallet.from_wallet(operator)
    from compute.transport import MinerClient

    chain = connect(f"sim:{path}", 27)
    store = ValidatorStore(tmp_path / "validator.db")
    async with MinerClient(operator_client) as op_client:
        oversight = Oversight(
            canary_rate=1.0,
            rng=random.Random(23),
            canary_renters=(CanaryRenter(op_client.hotkey, op_client, tmp_path / "operator-canary"),),
            canary_dir=tmp_path / "canary",
            canary_timing=CanaryTiming.for_dwell(0.6),
        )
        ctx = validator_context(chain, store, validator_client, oversight=oversight)
        loop = RoundLoop(ctx, interval_blocks=1, concurrency=4, step_timeout=180, show_table=False)
        try:
            for _ in range(ROUNDS):
                await loop.run_step(await chain_block_source(chain)())
            last = {r.uid: r for r in store.results(ROUNDS)}
        finally:
            store.close()
            chain.close()
    availability = {name: last[uid].availability for name, uid in uids.items()}
    # honest: every canary served; canary-aware: the validator's own hotkey served, its operator key
    # (an ordinary renter, like the four above) refused; refusing everyone: nothing served
    assert availability == pytest.approx(
        {"honest": 1.0, "validators-only": 1.0, "canary-aware": 2 / 3, "refuses-all": 1 / 3}
    )
    aware = miners["canary-aware"].manager
    assert op_client.hotkey in aware.refused and validator_client.hotkey not in aware.refused
    for name in ("canary-aware", "refuses-all"):
        reasons = last[uids[name]].reasons
        assert any(reason.startswith("availability x") for reason in reasons), reasons
    assert any(r.startswith("canary refused") for r in last[uids["refuses-all"]].reasons)
    assert all(last[uid].ok for uid in uids.values())  # every PoG passed: the factor alone lowers them
    for miner in miners.values():
        assert await miner.backend.running() == set()  # every canary released
