"""One device, one reward; canary rentals; the factors they give. Pure tables first, then a real
round over real miners: honest ones, one that refuses every lease while claiming "rented", and two
hotkeys that hand out the same box."""

from __future__ import annotations

from pathlib import Path

import pytest
from validator_helpers import (
    FAKE_GPU,
    Miner,
    port_block,
    register_and_serve,
    validator_client_of,
    validator_context,
)

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.chain import MetagraphSnapshot, NeuronInfo, connect
from compute.localnet.cheaters import OneBoxBackend, RefusingManager
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.protocol import GpuSpec
from compute.store import PogResult, ValidatorStore
from compute.transport import KeyWallet, ServerLimits, serve_in_thread
from compute.validator import RoundLoop, chain_block_source
from compute.validator.fleet.dedup import DeviceRegistry, Fingerprint, credit_once, suspect_groups
from compute.validator.fleet.oversight import Oversight
from compute.validator.params import MinerTarget
from compute.validator.rentals.canary import CanaryOutcome, CanaryRenter, CanaryTiming, run_canary
from compute.validator.rentals.ledger import RentalLedger
from compute.validator.rentals.receipts import RentalCheck, VerifiedLease
from compute.validator.rentals.truth import MinerNotes

FAST = CanaryTiming.for_dwell(0.6)  # the canary's stay and its "busy" retry, short for tests


def fp(uid: int, ip: str = "10.0.0.1", uuids=(), keys=(), endpoints=()) -> Fingerprint:
    return Fingerprint(uid, f"hk{uid}", ip, frozenset(uuids), frozenset(keys), frozenset(endpoints))


def result(uid: int, sample: float) -> PogResult:
    return PogResult(1, uid, f"hk{uid}", ok=True, sample=sample)


@pytest.mark.parametrize(
    ("prints", "zeroed"),
    [
        ([fp(1, uuids={"GPU-a"}), fp(2, "10.0.0.2", uuids={"GPU-a"})], {2}),
        ([fp(1, keys={"ssh-ed25519 AAAA1"}), fp(2, "10.0.0.2", keys={"ssh-ed25519 AAAA1"})], {2}),
        ([fp(1, endpoints={"1.2.3.4:40000"}), fp(2, "10.0.0.2", endpoints={"1.2.3.4:40000"})], {2}),
        ([fp(1, uuids={"GPU-a"}), fp(2, uuids={"GPU-b"})], set()),  # one IP, two devices
        ([fp(1, uuids={"GPU-a"}), fp(2, "10.0.0.2", uuids={"GPU-b"})], set()),
    ],
)
def test_a_shared_device_is_credited_once(prints, zeroed) -> None:
    devices = DeviceRegistry().shared_devices(prints, {1: 2.0, 2: 1.0})
    out = {r.uid: r for r in credit_once([result(1, 2.0), result(2, 1.0)], devices)}
    assert {uid for uid, r in out.items() if r.sample == 0} == zeroed
    for uid in zeroed:
        assert "shared device" in out[uid].reasons[0] and out[uid].shared_with == (1,)
    if zeroed:
        assert out[1].sample == 2.0 and "credited once, here" in out[1].reasons[-1]


def test_a_copycat_cannot_evict_the_first_owner_of_a_gpu() -> None:
    registry = DeviceRegistry()
    registry.shared_devices([fp(1, uuids={"GPU-a"})], {1: 1.0})  # uid 1 showed GPU-a first
    copycat = [fp(1, uuids={"GPU-a"}), fp(2, "10.0.0.2", uuids={"GPU-a"})]
    (device,) = registry.shared_devices(copycat, {1: 1.0, 2: 9.0})  # the copycat scores higher
    assert device.keeper == 1


def test_the_keeper_of_a_shared_device_stays_the_keeper() -> None:
    registry = DeviceRegistry()
    pair = [fp(1, uuids={"GPU-a"}), fp(2, "10.0.0.2", uuids={"GPU-a"})]
    assert registry.shared_devices(pair, {1: 1.0, 2: 2.0})[0].keeper == 2
    assert registry.shared_devices(pair, {1: 3.0, 2: 2.0})[0].keeper == 2  # not whoever scores best now


SQUATTER, NEWCOMER = 1, 2


def _round(
    oversight: Oversight, outcomes: dict[int, tuple[bool, float | None]], *, keys=None, windowed=True
) -> dict[int, PogResult]:
    """One round's close: each uid (ok, memory proven GB) showing GPU-a; ``windowed``: the
    suspects of the last round were proven in one window (``plan``), as the round loop does."""
    if windowed:
        oversight.plan(outcomes)
    else:
        oversight.windowed = ()
    results = [
        PogResult(1, uid, f"hk{uid}", ok=ok, sample=1.0 if ok else 0.0, mem_proven_gb=memory)
        for uid, (ok, memory) in outcomes.items()
    ]
    notes = {uid: MinerNotes(gpu_uuids={"GPU-a"}, host_keys=set(keys or ())) for uid in outcomes}
    axons = {uid: f"10.0.0.{uid}:8091" for uid in outcomes}
    return {r.uid: r for r in oversight.close(results, notes, axons)}


def _squatted() -> Oversight:
    """The squatter showed the newcomer's GPU UUID before this validator first saw the newcomer
    (read off a rental of the newcomer's machine), then both were seen: the newcomer was zeroed."""
    oversight = Oversight()
    _round(oversight, {SQUATTER: (True, 79.0)}, windowed=False)
    first = _round(oversight, {SQUATTER: (True, 79.0), NEWCOMER: (True, 79.0)}, windowed=False)
    assert first[NEWCOMER].sample == 0.0 and first[SQUATTER].sample == 1.0  # the one round it costs
    assert oversight.suspects == [frozenset({SQUATTER, NEWCOMER})]  # proven together next round
    return oversight


@pytest.mark.parametrize("squatter_fails_on_purpose", [False, True])
def test_a_squatted_uuid_zeroes_nobody_once_the_window_proves_two_devices(squatter_fails_on_purpose) -> None:
    """The squatter's best variant: show the newcomer's UUIDs first, and when proven beside it,
    fail on purpose (a cheap sacrificial hotkey) so the window seems undecided. The newcomer held
    its own memory proof at that moment: it keeps its credit, every round from then on."""
    oversight = _squatted()
    squatter = (False, 0.0) if squatter_fails_on_purpose else (True, 79.0)
    for _ in range(2):
        after = _round(oversight, {SQUATTER: squatter, NEWCOMER: (True, 79.0)})
        assert after[NEWCOMER].sample == 1.0 and after[NEWCOMER].shared_with == ()
        assert after[SQUATTER].sample == (0.0 if squatter_fails_on_purpose else 1.0)
        assert oversight.suspects == [frozenset({SQUATTER, NEWCOMER})]  # still proven together


def test_one_device_behind_two_hotkeys_still_earns_once_when_its_uuid_is_judged_by_the_window() -> None:
    """One GPU cannot hold both simultaneous memory proofs: one hotkey fails, one device earns."""
    oversight = _squatted()
    after = _round(oversight, {SQUATTER: (True, 79.0), NEWCOMER: (False, 0.0)})
    assert sum(r.sample for r in after.values()) == 1.0


@pytest.mark.parametrize(
    ("newcomer", "keys", "windowed"),
    [
        ((True, None), (), True),  # passed without a memory proof (a rented check): nothing proven
        ((True, 79.0), (), False),  # not proven in one window with the squatter
        ((True, 79.0), ("ssh-ed25519 AAAA1",), True),  # one lease host key: the validator saw it
    ],
)
def test_a_uuid_collision_still_counts_where_the_window_did_not_decide(newcomer, keys, windowed) -> None:
    oversight = _squatted()
    after = _round(oversight, {SQUATTER: (True, 79.0), NEWCOMER: newcomer}, keys=keys, windowed=windowed)
    assert after[NEWCOMER].sample == 0.0 and after[SQUATTER].sample == 1.0


def test_same_ip_or_ssh_host_makes_suspects_tested_together() -> None:
    prints = [fp(1), fp(2), fp(3, "10.0.0.3", endpoints={"10.0.0.1:4000"}), fp(4, "10.0.0.4")]
    assert suspect_groups(prints) == [frozenset({1, 2, 3})]


def _lease(sig: str) -> VerifiedLease:
    return VerifiedLease("0" * 32, "renter", 1, sig, 0.0, 1e12, "127.0.0.1", 1, "ssh-ed25519 AAAA")


def test_ledger_factors_only_lower_and_start_at_one() -> None:
    ledger = RentalLedger()
    assert ledger.availability("hk") == 1.0 and ledger.uptime("hk") == 1.0
    ledger.canary("hk", CanaryOutcome(True))
    assert ledger.availability("hk") == 1.0
    ledger.canary("hk", CanaryOutcome(False, "canary refused", refused=True))
    assert ledger.availability("hk") == pytest.approx(2 / 3)
    ledger.observe("hk", RentalCheck(alive=(_lease("a"), _lease("b"))))
    ledger.observe("hk", RentalCheck(alive=(_lease("a"),), dead=(_lease("b"),)))
    assert ledger.uptime("hk") == 0.5  # lease b went dark inside its term
    ledger.observe("hk", RentalCheck(alive=(_lease("b"),)))
    assert ledger.uptime("hk") == 0.5  # coming back does not undo an outage


def start_custom(
    tmp_path: Path, make_wallet, name: str, *, box: Path | None = None, refuse=False, policy=None
) -> Miner:
    wallet = make_wallet(name)
    data = tmp_path / name
    kwargs = dict(bind_host="127.0.0.1", port_range=port_block())
    backend = OneBoxBackend(data, box, **kwargs) if box else EmbeddedBackend(data, **kwargs)
    gpus: list[GpuSpec] = [FAKE_GPU] if refuse else []
    manager_type = RefusingManager if refuse else AllocationManager
    manager = manager_type(
        LeaseStore(data / "leases.db"),
        backend,
        gpus,
        ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10),
    )
    specs = fixed_specs(gpus)
    keypair = KeyWallet.from_wallet(wallet)
    app = build_miner_app(keypair, policy, manager, lambda: specs, ServerLimits(rate_per_s=100, burst=100))
    server = serve_in_thread(app, "127.0.0.1", 0)
    miner = Miner(name, f"127.0.0.1:{server.port}", keypair.ss58, wallet, manager, backend)
    miner.server = server  # type: ignore[attr-defined]
    return miner


@pytest.fixture
def cheaters_net(tmp_path: Path, sim_chain, make_wallet, validator_client):
    path, state = sim_chain
    wallet = validator_client.wallet_obj
    state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0, True)
    box = tmp_path / "box_host_key"
    miners = {
        "honest1": start_custom(tmp_path, make_wallet, "honest1"),
        "honest2": start_custom(tmp_path, make_wallet, "honest2"),
        "refuser": start_custom(tmp_path, make_wallet, "refuser", refuse=True),
        "box-a": start_custom(tmp_path, make_wallet, "box-a", box=box),
        "box-b": start_custom(tmp_path, make_wallet, "box-b", box=box),
    }
    uids = {name: register_and_serve(path, state, miner) for name, miner in miners.items()}
    chain = connect(f"sim:{path}", 27)
    store = ValidatorStore(tmp_path / "validator.db")
    yield chain, store, wallet, uids, miners
    store.close()
    chain.close()
    for miner in miners.values():
        miner.server.stop()  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_round_credits_honest_miners_and_neither_cheat(cheaters_net, validator_client) -> None:
    chain, store, wallet, uids, miners = cheaters_net
    oversight = Oversight(canary_rate=1.0, canary_timing=FAST, canary_dir=canary_dir_of(store))
    ctx = validator_context(
        chain, store, validator_client, hotkey=wallet.hotkey.ss58_address, oversight=oversight
    )
    loop = RoundLoop(ctx, interval_blocks=1, concurrency=5, step_timeout=180, show_table=False)
    await loop.run_step(await chain_block_source(chain)())
    scores = {uid: rec.score for uid, rec in store.scores().items()}
    by_name = {name: scores[uid] for name, uid in uids.items()}
    assert by_name["honest1"] > 0 and by_name["honest2"] > 0
    assert by_name["refuser"] == 0.0
    results = {r.uid: r for r in store.results(1)}
    for name in ("honest1", "honest2"):  # two honest distinct miners on one IP are unaffected
        assert results[uids[name]].ok and results[uids[name]].sample > 0
        assert results[uids[name]].shared_with == () and results[uids[name]].availability == 1.0
        assert not any("shared device" in reason for reason in results[uids[name]].reasons)
    box = sorted((results[uids["box-a"]], results[uids["box-b"]]), key=lambda r: r.sample)
    assert box[0].shared_with == (box[1].uid,) and box[1].shared_with == (box[0].uid,)  # stored verdicts
    assert results[uids["refuser"]].availability == 0.5  # its refused canary, as stored
    assert sorted([by_name["box-a"], by_name["box-b"]])[0] == 0.0  # the box is credited once ...
    assert sorted([by_name["box-a"], by_name["box-b"]])[1] > 0  # ... not zero times
    # canaries ran: honest miners keep availability 1, the refuser's refusal lowered its own
    assert oversight.ledger.availability(miners["honest1"].hotkey) == 1.0
    assert oversight.ledger.availability(miners["refuser"].hotkey) == 0.5
    # next round the one-IP miners are challenged at the same moment
    assert {uids["box-a"], uids["box-b"]} <= set().union(*oversight.suspects)


def canary_dir_of(store: ValidatorStore) -> Path:
    """The canary books beside the validator's store (its data directory, as in production)."""
    return Path(store.path).parent / "canary"


def canary_target(miner: Miner) -> MinerTarget:
    return MinerTarget(1, miner.hotkey, miner.endpoint)


async def test_canary_works_end_to_end_on_an_honest_miner_and_leaves_nothing(
    tmp_path: Path, make_wallet, validator_client
) -> None:
    import random

    miner = start_custom(tmp_path, make_wallet, "honest")
    renter = CanaryRenter(validator_client.hotkey, validator_client, tmp_path / "canary")
    try:
        outcome = await run_canary(renter, canary_target(miner), random.Random(1), FAST)
        assert outcome.ok, outcome.reason
        assert outcome.signer == validator_client.hotkey and 0 < outcome.held_s <= outcome.seconds
        assert await miner.backend.running() == set()  # released, and its endpoint checked gone
        (entry,) = renter.book.entries(renter.hotkey, include_ended=True)  # the operator's own book
        assert entry.state == "released" and not list((tmp_path / "canary" / "keys").glob("lease-*"))
        assert renter.own_keys(entry.created_at) == {" ".join(entry.public_key.split()[:2])}
        refuser = start_custom(tmp_path, make_wallet, "refuser", refuse=True)
        refused = await run_canary(renter, canary_target(refuser), random.Random(2), FAST)
        assert not refused.ok and refused.refused and not refused.excused  # asked twice, refused twice
        refuser.server.stop()  # type: ignore[attr-defined]
    finally:
        miner.server.stop()  # type: ignore[attr-defined]


async def test_broken_canary_lease_is_a_failure(tmp_path: Path, make_wallet, validator_client) -> None:
    import random

    miner = start_custom(tmp_path, make_wallet, "broken")
    start = miner.backend.start

    async def start_then_break(lease):  # the lease starts, but nothing answers behind the endpoint
        endpoint = await start(lease)
        await miner.backend.stop(lease.lease_id)
        return endpoint

    miner.backend.start = start_then_break  # type: ignore[method-assign]
    renter = CanaryRenter(validator_client.hotkey, validator_client, tmp_path / "canary")
    try:
        outcome = await run_canary(renter, canary_target(miner), random.Random(3), FAST)
        assert not outcome.ok and not outcome.refused and "SSH" in outcome.reason
    finally:
        miner.server.stop()  # type: ignore[attr-defined]


async def test_an_open_refusal_by_access_policy_counts_only_for_the_validators_own_hotkey(
    tmp_path: Path, make_wallet, validator_client
) -> None:
    """A miner may refuse a renter key outright (403, visible to every renter as "refused"): not a
    canary failure; refusing the hotkey it serves validation leases to is."""
    import random

    from compute.transport import AccessPolicy

    operator = make_wallet("operator")
    snapshot = MetagraphSnapshot(
        27,
        1,
        tuple(
            NeuronInfo(uid, hotkey, hotkey, 10.0, False, None, True, 0)
            for uid, hotkey in enumerate((validator_client.hotkey, operator.hotkey.ss58_address))
        ),
    )
    policy = AccessPolicy(lambda: snapshot, require_permit=False, deny_hotkeys={operator.hotkey.ss58_address})
    policy.load()
    miner = start_custom(tmp_path, make_wallet, "picky", policy=policy)
    try:
        async with validator_client_of(operator, 30) as client:
            renter = CanaryRenter(client.hotkey, client, tmp_path / "op")
            closed = await run_canary(renter, canary_target(miner), random.Random(5), FAST)
            assert not closed.ok and closed.excused and "access policy" in closed.reason
            own = CanaryRenter(client.hotkey, client, tmp_path / "own", validator=True)  # as if it were
            refused = await run_canary(own, canary_target(miner), random.Random(5), FAST)  # the validator's
            assert not refused.ok and refused.refused and not refused.excused
    finally:
        miner.server.stop()  # type: ignore[attr-defined]
