"""The lockstep window: its gates, the exclusivity judge, and the cheats it stops, played for real.

Pure tables and the barrier first; then real rounds (signed miner apps on 127.0.0.1, embedded SSH
leases, the real worker) in which one emulated device (``compute.localnet.one_device``: a GPU holds
one resident matrix at a time) sits behind several hotkeys or several hosts of one miner, each
playing its best moment to take the device. The same device behind one hotkey is the yardstick.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from validator_helpers import Miner, port_block, register_and_serve, small_params, validator_context

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.allocation.hosts.backend import MultiHostBackend
from compute.allocation.hosts.check import HostCheck
from compute.allocation.hosts.config import HostConfig, parse_hosts
from compute.allocation.lifecycle.hostwatch import check_and_recover
from compute.chain import connect
from compute.localnet.one_device import device_bin
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.scoring import ProvenGpu, ScoringConfig, gpu_credit, load_gpu_table
from compute.scoring.value import table_figures
from compute.store import ValidatorStore
from compute.transport import KeyWallet, ServerLimits, serve_in_thread
from compute.validator import MinerCheck, MinerTarget, RoundLoop, chain_block_source, check_miner
from compute.validator.lockstep.window import SeatLate, Window
from compute.validator.params import LockstepParams
from compute.validator.round.windows import pack_windows

TABLE = load_gpu_table()
SCORING = ScoringConfig()


# ---------------------------------------------------------------- pure (the judge itself: test_residency.py)
def test_a_fast_device_claiming_no_gpu_behind_three_hotkeys_earns_at_most_three_cpu_floors() -> None:
    """What the CPU slack does not bound: a device much faster than the CPU table (an H100 claiming
    no GPU, or a real CPU with RAM for many matrices) can compute every hotkey's chain at the moment
    and answer all three windows. Its credit per hotkey is the CPU class's (its proven memory is the
    CPU-sized matrix, so no GPU model is identified): three hotkeys earn under 5 % of what the same
    H100 earns honestly as one GPU."""
    h100 = TABLE.models["H100 SXM"]
    honest = gpu_credit(table_figures(h100), TABLE).value
    as_cpu = ProvenGpu(h100.tflops_fp16, h100.tflops_fp32, 0.0016, h100.bandwidth_gbs)  # 1.6 MB matrix
    credit = gpu_credit(as_cpu, TABLE)
    assert credit.credited_as is None and credit.value <= 0.01 * 5.0 * 1.1
    assert 3 * credit.value < 0.05 * honest


def test_windows_keep_groups_whole_and_respect_the_size() -> None:
    targets = [MinerTarget(uid, f"hk{uid}", f"10.0.0.{uid}:1") for uid in range(1, 8)]
    windows = pack_windows(targets, [frozenset({2, 6}), frozenset({6, 7})], size=3)
    uids = [[t.uid for t in w] for w in windows]
    assert [2, 6, 7] in uids  # overlapping groups merge, and a group is never split
    assert sorted(u for w in uids for u in w) == list(range(1, 8))
    assert all(len(w) <= 3 for w in uids)
    assert pack_windows(targets, [], size=16) == [targets]  # everyone fits: one window, one moment


# ---------------------------------------------------------------- the barrier
async def test_gates_fall_when_every_seat_arrived_and_a_late_seat_is_absent() -> None:
    async with Window("w", prepare_s=5.0) as window:
        seats = [window.seat(name) for name in ("a", "b", "c")]
        window.start()
        order: list[str] = []

        async def honest(seat, delay: float) -> None:
            await asyncio.sleep(delay)
            await seat.arrive("prepared", 0.3)  # build bound: 0.3 s
            await seat.arrive("built", 1.0)
            seat.mark_started(window.clock())
            order.append(seat.name)
            await seat.arrive("chained")

        async def slow_builder(seat) -> None:
            await seat.arrive("prepared", 0.3)
            await asyncio.sleep(1.0)  # builds past the bound: the gate falls without it
            with pytest.raises(SeatLate):
                await seat.arrive("built", 1.0)

        await asyncio.wait_for(
            asyncio.gather(honest(seats[0], 0.0), honest(seats[1], 0.2), slow_builder(seats[2])), 10
        )
        assert sorted(order) == ["a", "b"] and seats[2].late_at == "built"
        assert window.fell_at["built"] - window.fell_at["prepared"] == pytest.approx(0.3, abs=0.2)
        assert window.moment is not None


async def test_a_seat_that_leaves_is_not_waited_for_and_windows_take_turns_at_the_timed_lock() -> None:
    lock = asyncio.Lock()
    events: list[str] = []

    async def run(label: str) -> None:
        async with Window(label, prepare_s=5.0, timed_lock=lock) as window:
            stay, leave = window.seat("stay"), window.seat("leave")
            window.start()
            leave.leave()
            await stay.arrive("prepared", 1.0)
            events.append(f"{label} builds")
            await stay.arrive("built", 1.0)
            await asyncio.sleep(0.2)
            events.append(f"{label} chained")
            await stay.arrive("chained")

    await asyncio.wait_for(asyncio.gather(run("one"), run("two")), 10)
    assert events in (
        ["one builds", "one chained", "two builds", "two chained"],
        ["two builds", "two chained", "one builds", "one chained"],
    )


# ---------------------------------------------------------------- cheats through the real round
def cpu_lease_env(root: Path) -> dict[str, str]:
    """A lease environment without torch (a miner that has none installed: the worker uses numpy),
    so a loaded CI machine does not spend the worker's start importing it; and with one BLAS thread,
    as each of several machines sharing these two cores would have. With OpenBLAS's default threads,
    which keep spinning after each call, two CPU provers at once ran ~100x slower (a 4-segment
    sustained run: 54 s instead of 0.6 s), so an honest miner's run came out "throttled", was
    confirmed by a second one, and its test ran past the 60 s budget."""
    stub = root / "no-torch" / "torch"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text('raise ImportError("torch is not installed in this lease")\n')
    return {"PYTHONPATH": str(stub.parent), "OPENBLAS_NUM_THREADS": "1"}


def device_miner(
    tmp_path: Path, make_wallet, name: str, device: Path | None, mode: str = "wait-build"
) -> Miner:
    """A miner on 127.0.0.1 whose leases run the emulated ``device`` (None: an honest CPU miner)."""
    wallet = make_wallet(name)
    data = tmp_path / name
    prefix = [device_bin(tmp_path / "bins", device, mode)] if device else []
    backend = EmbeddedBackend(
        data,
        bind_host="127.0.0.1",
        port_range=port_block(),
        path_prefix=prefix,
        extra_env=cpu_lease_env(tmp_path),
    )
    manager = AllocationManager(
        LeaseStore(data / "leases.db"), backend, [], ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10)
    )
    specs = fixed_specs([])
    keypair = KeyWallet.from_wallet(wallet)
    app = build_miner_app(keypair, None, manager, lambda: specs, ServerLimits(rate_per_s=100, burst=100))
    server = serve_in_thread(app, "127.0.0.1", 0)
    miner = Miner(name, f"127.0.0.1:{server.port}", keypair.ss58, wallet, manager, backend)
    miner.server = server  # type: ignore[attr-defined]
    return miner


@pytest.fixture
def device_net(tmp_path: Path, sim_chain, make_wallet, validator_client):
    """Factory: honest CPU miners plus ``hotkeys`` hotkeys on one emulated device playing ``mode``."""
    opened: list = []

    def make(honest: int, hotkeys: int, mode: str):
        path, state = sim_chain
        wallet = validator_client.wallet_obj
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0, True)
        device = tmp_path / "device.lock"
        miners = {
            f"honest{i}": device_miner(tmp_path, make_wallet, f"honest{i}", None) for i in range(honest)
        }
        miners |= {
            f"sybil{i}": device_miner(tmp_path, make_wallet, f"sybil{i}", device, mode)
            for i in range(hotkeys)
        }
        uids = {name: register_and_serve(path, state, miner) for name, miner in miners.items()}
        chain = connect(f"sim:{path}", 27)
        store = ValidatorStore(tmp_path / "validator.db")
        opened.append((store, chain, miners))
        return chain, store, wallet, uids

    yield make
    for store, chain, miners in opened:
        store.close()
        chain.close()
        for miner in miners.values():
            miner.server.stop()


async def one_round(chain, store, wallet, client, judge: bool = True) -> dict[int, object]:
    """One real round; ``judge=False``: the residency judge switched off (the control of a cheat)."""
    params = small_params(lockstep=LockstepParams(judge=judge))
    ctx = validator_context(chain, store, client, hotkey=wallet.hotkey.ss58_address, params=params)
    loop = RoundLoop(ctx, interval_blocks=1, concurrency=16, step_timeout=240, show_table=False)
    await loop.run_step(await chain_block_source(chain)())
    return {r.uid: r for r in store.results(store.rounds_finished())}


@pytest.mark.parametrize("mode", ["wait-info", "wait-build", "late-start", "regen-first"])
@pytest.mark.slow
async def test_serialising_sybil_is_credited_at_most_once(device_net, validator_client, mode) -> None:
    """Three hotkeys on one device, each lease taking the device at its best moment (before info, at
    the build, only when the start comes, or regenerating its first passes while another chain holds
    the device). Before the lockstep window, the ``wait-info`` play was credited 3 of 3; before the
    pace of every pass, ``regen-first`` was (3 of 3 in each round); now at most one hotkey is, and
    honest miners keep theirs."""
    chain, store, wallet, uids = device_net(1, 3, mode)
    results = await one_round(chain, store, wallet, validator_client)
    for name in ("honest0",):
        assert results[uids[name]].ok and results[uids[name]].sample > 0, results[uids[name]].reasons
    sybil = [results[uids[f"sybil{i}"]] for i in range(3)]
    credited = [r for r in sybil if r.sample > 0]
    assert len(credited) <= 1, [r.reasons for r in sybil]
    for r in sybil:
        if r.sample == 0:
            assert any("lockstep" in reason or "not ready" in reason for reason in r.reasons), r.reasons


@pytest.mark.slow
async def test_one_device_behind_one_hotkey_is_credited(device_net, validator_client) -> None:
    """The yardstick: the emulated device, alone, passes the lockstep round (so the test above can fail)."""
    chain, store, wallet, uids = device_net(1, 1, "wait-build")
    results = await one_round(chain, store, wallet, validator_client)
    assert results[uids["sybil0"]].ok and results[uids["sybil0"]].sample > 0, results[uids["sybil0"]].reasons
    assert results[uids["sybil0"]].timings["late_s"] < 0  # every pass in time


@pytest.mark.slow
async def test_regenerating_first_passes_is_seen_only_by_the_pace_of_every_pass(
    device_net, validator_client
) -> None:
    """The control of ``regen-first``: in a round with the residency judge switched off, three
    hotkeys on one device are credited with their memory proven more than once (the first chain held
    the device, the second regenerated its first passes and took it after: its mean pass passes the
    memory time judge; the third, a chain later still, fails it). In the next round, with the judge,
    once."""
    chain, store, wallet, uids = device_net(0, 3, "regen-first")
    off = await one_round(chain, store, wallet, validator_client, judge=False)
    present = [r for r in (off[uids[f"sybil{i}"]] for i in range(3)) if r.sample > 0 and r.mem_proven_gb]
    assert len(present) >= 2, [(r.sample, r.mem_proven_gb, r.reasons) for r in off.values()]
    on = await one_round(chain, store, wallet, validator_client)
    sybil = [on[uids[f"sybil{i}"]] for i in range(3)]
    assert sum(r.sample > 0 for r in sybil) <= 1, [r.reasons for r in sybil]


@pytest.fixture
async def one_device_hosts(tmp_path: Path, make_wallet):
    """A multi-host miner whose hosts file lists ONE emulated device ``count`` times, each entry with
    its own address, SSH port and host key (nothing to correlate but the device itself)."""
    opened: list = []

    async def start(count: int, mode: str = "wait-build") -> MinerTarget:
        names = [f"box-{i}" for i in range(count)]
        entries = [
            {"name": n, "endpoint": f"unix:///run/{n}.sock", "ssh_host": f"127.0.0.{i + 1}"}
            for i, n in enumerate(names)
        ]
        hosts = parse_hosts({"hosts": entries})
        store = LeaseStore(tmp_path / "leases.db")
        device = tmp_path / "device.lock"

        def embedded(config: HostConfig) -> EmbeddedBackend:
            prefix = [device_bin(tmp_path / "bins", device, mode)]
            return EmbeddedBackend(
                tmp_path / config.name,
                config.ssh_host,
                bind_host=config.ssh_host,
                port_range=port_block(),
                path_prefix=prefix,
            )

        def host_of(lease_id: str) -> str | None:
            lease = store.get(lease_id)
            return None if lease is None else lease.record.host

        backend = MultiHostBackend(
            hosts, host_of, embedded, "img", checker=lambda c, i: HostCheck(True, "", (), 2, 2**33)
        )  # type: ignore[arg-type]
        manager = AllocationManager(store, backend, [], ManagerLimits(max_cpu=2), placement=backend)
        await check_and_recover(backend, manager)
        keypair = KeyWallet.from_wallet(make_wallet("hosts"))
        specs = fixed_specs(manager.gpus).model_copy(update={"hosts": backend.host_specs()})
        server = serve_in_thread(
            build_miner_app(keypair, None, manager, lambda: specs, ServerLimits(rate_per_s=100, burst=100)),
            "127.0.0.1",
            0,
        )
        opened.append((server, store))
        return MinerTarget(1, keypair.ss58, f"127.0.0.1:{server.port}")

    yield start
    for server, store in opened:
        server.stop()
        store.close()


@pytest.mark.slow
async def test_one_machine_listed_as_three_hosts_is_credited_as_one(
    one_device_hosts, validator_client
) -> None:
    """One machine three times in the hosts file (distinct addresses and host keys). All
    hosts of a miner share one lockstep window, so the device holds one matrix at the moment: one
    host credited, not three (before: 3 of 3)."""
    target = await one_device_hosts(3)
    result = await check_miner(MinerCheck(validator_client, target, small_params(), TABLE, SCORING))
    assert len(result.hosts) == 3
    credited = [name for name, sample in result.hosts.items() if sample > 0]
    assert len(credited) <= 1, result.reasons
    assert result.sample == pytest.approx(sum(result.hosts.values()))
    assert sum("lockstep" in r or "not ready" in r for r in result.reasons) >= 2, result.reasons


@pytest.mark.slow
async def test_one_machine_listed_as_three_hosts_regenerating_first_passes_is_credited_as_one(
    one_device_hosts, validator_client
) -> None:
    """The same three hosts (one device; other addresses, ports and host keys), each lease
    regenerating its first passes while another host's chain holds the device: with the judge off,
    more than one host is credited; with it, one."""
    target = await one_device_hosts(3, "regen-first")
    off = small_params(lockstep=LockstepParams(judge=False))
    result = await check_miner(MinerCheck(validator_client, target, off, TABLE, SCORING))
    assert sum(sample > 0 for sample in result.hosts.values()) >= 2, result.reasons
    result = await check_miner(MinerCheck(validator_client, target, small_params(), TABLE, SCORING))
    assert sum(sample > 0 for sample in result.hosts.values()) <= 1, result.reasons
