"""Child process of ``localnet --cheaters``: the cheating miners, served for real on 127.0.0.1.

``python -m compute.localnet.cheat_miners WORKDIR CHAIN_PATH`` serves, on one event loop, the
miner API (signed transport, embedded SSH backend) of the registered cheating hotkeys and publishes
their endpoints on the simulated chain:

- ``refuser``: claims one GPU and answers every GPU lease with ``no_capacity`` ("rented") although
  no renter holds anything;
- ``box-a`` and ``box-b``: two hotkeys that hand out the same box (one SSH host key);
- ``canary-aware``: serves every hotkey on a validator's coldkey (a metagraph lookup) and
  canary-shaped rentals, tells every other renter "no capacity" (the validators' canaries come from
  operator identities on coldkeys of their own);
- ``self-renter``: claims one GPU, which a validator-permitted hotkey of its own coldkey
  (``self-renter/renter``) rents for 30 days through register.py's operator service before it shows
  on chain, so every
  validation lease is refused as rented on the strength of a real, signed, live receipt (on this
  CPU demo a claimed GPU has no verified history to live on; ``tests/validator/test_self_rental.py``
  gives it one and shows the 3.63 it earned before);
- ``sybil-a``, ``sybil-b``, ``sybil-c``: three hotkeys on ONE emulated device
  (``compute.localnet.one_device``: one resident matrix at a time), each lease taking the device at
  its best moment: before answering ``info`` (a), only when the start comes (b, c);
- ``hosts-dup``: one miner whose hosts file lists one emulated device three times, each entry with
  its own address (127.0.0.1/2/3), SSH port and host key;
- ``hit-and-run``: its emulated device is there for its first test only, then gone for good.

It runs until SIGTERM. Demo only: nothing in the miner imports it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import bittensor as bt

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.allocation.hosts.backend import MultiHostBackend
from compute.allocation.hosts.check import HostCheck
from compute.allocation.hosts.config import HostConfig, parse_hosts
from compute.allocation.lifecycle.hostwatch import check_and_recover
from compute.chain import MetagraphSnapshot, connect
from compute.localnet.cheaters import (
    CanaryAwareManager,
    OneBoxBackend,
    RefusingManager,
    on_validator_coldkeys,
)
from compute.localnet.one_device import device_bin, send_away
from compute.localnet.processes import free_port
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.operator import LeaseBook, MinerRef, Operator, Wanted
from compute.protocol import GpuSpec, MachineSpecs
from compute.transport import KeyWallet, MinerClient, ServerLimits, serve

log = logging.getLogger("compute.localnet.cheat_miners")
NETUID = 27
CHEATERS = (
    "refuser",
    "box-a",
    "box-b",
    "canary-aware",
    "self-renter",
    "sybil-a",
    "sybil-b",
    "sybil-c",
    "hosts-dup",
    "hit-and-run",
)
# each takes the device at its best moment; a lease waiting at the build would only stretch the demo's
# windows by the CPU build bound (tests/validator/test_lockstep.py plays that variant)
SYBIL_MODES = {"sybil-a": "wait-info", "sybil-b": "late-start", "sybil-c": "late-start"}
DUP_HOSTS = 3
SELF_RENTER_KEY = "renter"  # the self-renter's second hotkey (its own coldkey), validator-permitted
MOCK_GPU = GpuSpec(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 10**9, uuid="GPU-mock-0")
SELF_GPU = MOCK_GPU.model_copy(update={"uuid": "GPU-mock-self"})


@dataclass(frozen=True)
class Net:
    """What the cheaters know of the demo network when they start."""

    workdir: Path
    chain_path: Path
    validators: frozenset[str]  # every hotkey on a validator's coldkey (a metagraph lookup)


async def rent_self(net: Net, miner_hotkey: str, endpoint: str) -> None:
    """What ``register.py allocate --hotkey MINER --gpu-count 1 --duration 30d`` does (its operator
    service), signed by the miner's own second hotkey, before the miner shows on chain."""
    renter = bt.Wallet(name="self-renter", hotkey=SELF_RENTER_KEY, path=str(net.workdir / "wallets"))
    data = net.workdir / "self-rental"
    async with MinerClient(KeyWallet.from_wallet(renter)) as client:
        operator = Operator(
            hotkey=client.hotkey,
            client=client,
            metagraph=lambda: MetagraphSnapshot(NETUID, 0, ()),
            book=LeaseBook(data / "leases.db"),
            data_dir=data,
            network=f"sim:{net.chain_path}",
            netuid=NETUID,
        )
        got = await operator.allocate(
            Wanted(gpu_count=1), 30 * 86400, target=MinerRef(miner_hotkey, endpoint)
        )
    log.info("self-renter: its own coldkey's hotkey rented its GPU, lease=%s", got.entry.lease_id)


def _specs(gpus: list[GpuSpec]) -> MachineSpecs:
    return fixed_specs(gpus, cpu_model="demo cpu", miner_version="cheater")


def device_path(net: Net, name: str) -> Path:
    """The emulated device behind ``name`` (the sybils share one)."""
    return net.workdir / "device" / ("sybil" if name.startswith("sybil-") else name)


async def _hosts_dup(net: Net, data: Path, low: int, limits: ManagerLimits):  # noqa: ANN202
    """One emulated device listed as ``DUP_HOSTS`` hosts (distinct addresses, ports, host keys)."""
    names = [f"dup-{i}" for i in range(DUP_HOSTS)]
    hosts = parse_hosts(
        {
            "hosts": [
                {"name": n, "endpoint": f"unix:///run/{n}.sock", "ssh_host": f"127.0.0.{i + 1}"}
                for i, n in enumerate(names)
            ]
        }
    )
    store = LeaseStore(data / "leases.db")
    bins = device_bin(net.workdir / "bins", device_path(net, "hosts-dup"), "wait-build")

    def embedded(config: HostConfig) -> EmbeddedBackend:
        first = low + 10 * names.index(config.name)
        return EmbeddedBackend(
            data / config.name,
            config.ssh_host,
            bind_host=config.ssh_host,
            port_range=(first, first + 9),
            path_prefix=[bins],
        )

    def host_of(lease_id: str) -> str | None:
        lease = store.get(lease_id)
        return None if lease is None else lease.record.host

    backend = MultiHostBackend(
        hosts,
        host_of,
        embedded,  # type: ignore[arg-type]  # the embedded backend stands in for each host's engine
        "demo",
        checker=lambda c, i: HostCheck(True, "", (), 2, 2**33),
    )
    manager = AllocationManager(store, backend, [], limits, placement=backend)
    await check_and_recover(backend, manager)
    specs = _specs(manager.gpus).model_copy(update={"hosts": backend.host_specs()})
    return manager, specs


async def gone_after_first_test(manager: AllocationManager, device: Path) -> None:
    """The hit-and-run's device leaves once its first validation lease (its first test) has ended,
    for good. A canary is a rental like any other: the device stays for it."""
    seen: set[str] = set()
    while True:
        live = {lease.lease_id for lease in manager.store.live() if lease.record.purpose == "validation"}
        if seen - live:
            break
        seen |= live
        await asyncio.sleep(0.2)
    send_away(device)
    log.info("hit-and-run: its device is gone (elsewhere) after its first test")


async def _app(net: Net, name: str, index: int, wallet: bt.Wallet):  # noqa: ANN202 - (app, manager)
    data = net.workdir / name
    low = 43500 + index * 50
    ports = (low, low + 49)
    limits = ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10)
    store = LeaseStore(data / "leases.db")
    manager: AllocationManager
    if name == "hosts-dup":
        store.close()
        manager, specs = await _hosts_dup(net, data, low, limits)
    elif name in SYBIL_MODES or name == "hit-and-run":
        mode = SYBIL_MODES.get(name, "try-build")
        device = device_bin(net.workdir / "bins", device_path(net, name), mode)
        embedded = EmbeddedBackend(data, bind_host="127.0.0.1", port_range=ports, path_prefix=[device])
        manager, specs = AllocationManager(store, embedded, [], limits), _specs([])
    elif name == "refuser":
        embedded = EmbeddedBackend(data, bind_host="127.0.0.1", port_range=ports)
        manager, specs = RefusingManager(store, embedded, [MOCK_GPU], limits), _specs([MOCK_GPU])
    elif name == "canary-aware":
        embedded = EmbeddedBackend(data, bind_host="127.0.0.1", port_range=ports)
        manager = CanaryAwareManager(store, embedded, [], limits, validators=lambda: net.validators)
        specs = _specs([])
    elif name == "self-renter":
        embedded = EmbeddedBackend(data, bind_host="127.0.0.1", port_range=ports)
        manager, specs = AllocationManager(store, embedded, [SELF_GPU], limits), _specs([SELF_GPU])
    else:
        backend = OneBoxBackend(
            data, net.workdir / "box" / "host_key", bind_host="127.0.0.1", port_range=ports
        )
        manager, specs = AllocationManager(store, backend, [], limits), _specs([])
    app = build_miner_app(KeyWallet.from_wallet(wallet), None, manager, lambda: specs, ServerLimits())
    return app, manager


async def run(workdir: Path, chain_path: Path) -> None:

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    chain = connect(f"sim:{chain_path}", NETUID)
    tasks = []
    try:
        net = Net(workdir, chain_path, on_validator_coldkeys(chain.metagraph()))
        for index, name in enumerate(CHEATERS):
            wallet = bt.Wallet(name=name, hotkey="default", path=str(workdir / "wallets"))
            port = free_port()
            app, manager = await _app(net, name, index, wallet)
            tasks.append(asyncio.create_task(serve(app, "127.0.0.1", port, stop)))
            if name == "hit-and-run":
                tasks.append(asyncio.create_task(gone_after_first_test(manager, device_path(net, name))))
            await asyncio.sleep(0.3)
            if name == "self-renter":
                await rent_self(net, wallet.hotkey.ss58_address, f"127.0.0.1:{port}")
            chain.serve(wallet, "127.0.0.1", port)
            log.info("%s hotkey=%s serving 127.0.0.1:%d", name, wallet.hotkey.ss58_address[:10], port)
    finally:
        chain.close()
    await stop.wait()
    await asyncio.gather(*tasks, return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m compute.localnet.cheat_miners WORKDIR CHAIN_PATH", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(run(Path(args[0]), Path(args[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
