"""Rented credit only for rented hardware proven present, played through the real validator.

The cheat: a miner proves its GPU once, then "rents" it for 30 days to a validator-permitted hotkey
the same owner holds on a SECOND coldkey (two coldkeys of one owner cannot be told apart: the
receipt is real, signed, alive and from a permitted key on another coldkey), and takes the GPU
elsewhere: it is there 1 round in 25. Before, every round credited it "rented" (the last
verification x 1.1, a liveness lease on the CPU) and presence counted its receipt: 110 % of a
full-time GPU. Now every round that credits rented time, and every presence check, proves the rented
GPU beside its tenant (``check.beside``), and an absent rented GPU earns nothing: the self-renter
earns what the same GPU, idle, earns when it is there that often. The control: an honest miner
rented by a real renter keeps the credit of the same GPU idle and always there.

Real miners on 127.0.0.1 (signed app, embedded SSH leases), each with one emulated GPU
(``compute.localnet.one_device``: a device file whose matrix is resident only while a lease holds
it, passes at the model's table bandwidth, away when sent away), a GPU model of this CPU's scale in
the table, the rentals made with the real ``register.py``; 25 real rounds of ``RoundLoop``, each
a presence check over every miner (one window, load budget 0).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from test_lockstep import cpu_lease_env
from test_self_rental import rent_with_register_py
from validator_helpers import (
    FAKE_GPU,
    Miner,
    emulated_params,
    port_block,
    register_and_serve,
    small_params,
    validator_context,
)

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.chain import connect
from compute.localnet.one_device import device_bin, send_away
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.protocol import AllocateRequest, ErrorCode, GpuSpec, RequestFailed, Requirements
from compute.scoring import load_gpu_table, presence_credit
from compute.store import PogResult, ValidatorStore
from compute.transport import KeyWallet, MinerClient, ServerLimits, serve_in_thread
from compute.validator import DepthParams, MinerTarget, RoundLoop, chain_block_source
from compute.validator.params import LockstepParams
from compute.validator.presence.check import check_presence
from compute.validator.round.loop import stored_shares

ROUNDS = 25
MODEL = "Emulated GPU"
GBS = 0.1  # the model's table bandwidth: the emulated device's passes run at it
# the emulated device rebuilds at one_device's REGEN_RATE; no host-link floor (its memory is RAM)
DEPTH = DepthParams(
    gpu_regen_rate=1e9,
    gpu_host_stream_gbs=0.0,
    sustained_seconds=1.0,
    sustained_segment_s=0.25,
    probe_ram_mb=16,
    probe_disk_mb=32,
)


@pytest.fixture
def emulated_table(tmp_path: Path):
    """The repo's table plus a GPU model this CPU can emulate (2.5 MB at 0.1 GB/s)."""
    raw = yaml.safe_load(Path("config/gpu_performance.yaml").read_text())
    raw["models"][MODEL] = {
        "display_name": "Emulated stand-in GPU",
        "aliases": [MODEL],
        "tflops_fp16": 0.001,
        "tflops_fp32": 0.001,
        "memory_gb": 0.0025,
        "bandwidth_gbs": GBS,
        "weight": 0.02,
    }
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_gpu_table(path)


def gpu_miner(tmp_path: Path, make_wallet, name: str) -> tuple[Miner, Path]:
    """A miner on 127.0.0.1 with one emulated GPU (its device file beside it)."""
    wallet, data, device = make_wallet(name), tmp_path / name, tmp_path / name / "device.lock"
    backend = EmbeddedBackend(
        data,
        bind_host="127.0.0.1",
        port_range=port_block(),
        path_prefix=[device_bin(data / "bins", device, "wait-build", GBS)],
        extra_env=cpu_lease_env(tmp_path),
    )
    gpu = GpuSpec(index=0, name=MODEL, memory_bytes=2_500_000, uuid=f"GPU-{name}")
    limits = ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10)
    manager = AllocationManager(LeaseStore(data / "leases.db"), backend, [gpu], limits)
    keypair = KeyWallet.from_wallet(wallet)
    specs = fixed_specs([gpu])
    app = build_miner_app(keypair, None, manager, lambda: specs, ServerLimits(rate_per_s=100, burst=100))
    server = serve_in_thread(app, "127.0.0.1", 0)
    miner = Miner(name, f"127.0.0.1:{server.port}", keypair.ss58, wallet, manager, backend)
    miner.server = server  # type: ignore[attr-defined]
    return miner, device


@pytest.mark.slow
async def test_a_self_rental_through_a_second_coldkey_earns_what_its_gpu_earns_when_there(
    tmp_path: Path, sim_chain, make_wallet, validator_client, emulated_table
) -> None:
    path, state = sim_chain
    vwallet = validator_client.wallet_obj
    state.register(vwallet.hotkey.ss58_address, vwallet.coldkeypub.ss58_address, 5000.0, True)
    names = ("self-renter", "yardstick", "rented", "idle")  # yardstick: the same GPU, idle, there as often
    built = {name: gpu_miner(tmp_path, make_wallet, name) for name in names}
    miners = {name: miner for name, (miner, _) in built.items()}
    uids = {name: register_and_serve(path, state, miner) for name, miner in miners.items()}
    # the owner's validator-permitted hotkey on its SECOND coldkey; the control's real renter
    second, real = make_wallet("owner-second-coldkey"), make_wallet("real-renter")
    for renter in (second, real):
        state.register(renter.hotkey.ss58_address, renter.coldkeypub.ss58_address, 5000.0, True)
    chain = connect(f"sim:{path}", 27)
    store = ValidatorStore(tmp_path / "validator.db")
    params = small_params(depth=DEPTH, lockstep=LockstepParams(lead_slack_s=1.8))
    ctx = validator_context(chain, store, validator_client, params=params, table=emulated_table)
    loop = RoundLoop(ctx, interval_blocks=1, concurrency=4, step_timeout=300, show_table=False)
    earned = dict.fromkeys(names, 0.0)
    first = {}
    try:
        for round_number in range(1, ROUNDS + 1):
            await loop.run_step(await chain_block_source(chain)())
            if round_number == 1:  # every GPU proven once; then the rentals, and two GPUs leave
                first = {r.uid: r for r in store.results(1)}
                for miner, renter in (("self-renter", second), ("rented", real)):
                    lease = await asyncio.to_thread(
                        rent_with_register_py, path, renter, uids[miner], tmp_path / f"lease-{miner}"
                    )
                    assert lease["time_left_s"] > 29 * 86400
                for name in ("self-renter", "yardstick"):  # there 1 round in 25
                    send_away(built[name][1])
            shares = stored_shares(store, 16)
            for name, uid in uids.items():
                record = store.scores().get(uid)
                earned[name] += presence_credit(record.score if record else 0.0, miners[name].hotkey, shares)
        last = {r.uid: r for r in store.results(ROUNDS)}
        measured = {name: proven_samples(store, uid) for name, uid in uids.items()}
    finally:
        store.close()
        chain.close()
        for miner in miners.values():
            miner.server.stop()  # type: ignore[attr-defined]
    assert all(first[uid].ok for uid in uids.values()), {n: first[u].reasons for n, u in uids.items()}
    cheat, control = last[uids["self-renter"]], last[uids["rented"]]
    assert not cheat.ok and "beside their tenants" in cheat.reasons[0], cheat.reasons  # a receipt, no GPU
    assert control.ok and control.rented and control.rented_fraction == 1.0, control.reasons
    # each miner's credit in units of its own GPU's mean proven sample (the samples its credit came
    # from: round 1's for the three that left or were rented after it, all 25 for the idle one). The
    # four GPUs are one model, but emulated on this loaded CPU one measurement differs from another
    # by up to ~1.6x (round 1 proves four at once), which is the emulation's noise, not the cheat's
    # gain: that would be rented or present credit in the 24 rounds its GPU was away, ~24x.
    per_sample = {name: earned[name] / (sum(measured[name]) / len(measured[name])) for name in names}
    assert per_sample["yardstick"] > 0, earned
    assert per_sample["self-renter"] <= 1.05 * per_sample["yardstick"], (earned, per_sample)
    assert per_sample["rented"] >= 0.9 * per_sample["idle"], (earned, per_sample)  # the control keeps it


def proven_samples(store: ValidatorStore, uid: int) -> list[float]:
    """Every sample the validator measured on this miner's GPU itself (ok, not rented), round by round."""
    return [
        result.sample
        for round_id in range(1, ROUNDS + 1)
        for result in store.results(round_id)
        if result.uid == uid and result.ok and not result.rented
    ]


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.mark.slow
async def test_a_presence_check_counts_a_rented_gpu_only_where_it_is_proven_beside_its_tenant(
    start_miner, validator_client, make_wallet
) -> None:
    """Two miners rented for 30 days by a validator-permitted key (receipts verified), checked at
    one moment: the one that shows its rented GPU beside the tenant is present; the one whose GPU
    is elsewhere (no lease beside its tenant) is absent, its receipt notwithstanding."""
    renter = make_wallet("renter")
    miners = {name: start_miner(name, gpus=(FAKE_GPU,)) for name in ("there", "elsewhere")}
    request = AllocateRequest(
        requirements=Requirements(gpu_count=1), duration_s=30 * 86400, ssh_public_key=KEY
    )
    async with MinerClient(KeyWallet.from_wallet(renter)) as client:
        for miner in miners.values():
            await client.call(miner.endpoint, miner.hotkey, request)
    allocate = miners["elsewhere"].manager.allocate

    async def no_beside(owner, req, receipt=None):
        if req.purpose == "beside":
            raise RequestFailed(ErrorCode.NO_CAPACITY, "the GPU is elsewhere", 409)
        return await allocate(owner, req, receipt)

    miners["elsewhere"].manager.allocate = no_beside
    targets = [MinerTarget(uid, m.hotkey, m.endpoint) for uid, m in enumerate(miners.values(), 1)]
    previous = {
        t.uid: PogResult(3, t.uid, t.hotkey, ok=True, sample=3.3, models=("H100 SXM",), gpu_count=1)
        for t in targets
    }
    params = emulated_params(trusted_renters=frozenset({renter.hotkey.ss58_address}))
    ctx = validator_context(None, None, validator_client, params=params)
    entries = {e.uid: e for e in await check_presence(ctx, targets, previous, params)}
    assert entries[1].fraction == 1.0, entries[1].reason
    assert entries[2].fraction == 0.0 and "no lease beside the tenants" in entries[2].reason, entries[
        2
    ].reason
