"""Child process of ``localnet --cheaters``: the cheating miners, served for real on 127.0.0.1.

``python -m compute.localnet.cheat_miners WORKDIR CHAIN_PATH`` serves, on one event loop, the
miner API (signed transport, embedded SSH backend) of three registered demo hotkeys and publishes
their endpoints on the simulated chain:

- ``refuser``: claims one GPU and answers every GPU lease with ``no_capacity`` ("rented") although
  no renter holds anything;
- ``box-a`` and ``box-b``: two hotkeys that hand out the same box (one SSH host key).

It runs until SIGTERM. Demo only: nothing in the miner imports it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

import bittensor as bt

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.chain import connect
from compute.localnet.cheaters import OneBoxBackend, RefusingManager
from compute.localnet.processes import free_port
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.protocol import GpuSpec, MachineSpecs
from compute.transport import KeyWallet, ServerLimits, serve

log = logging.getLogger("compute.localnet.cheat_miners")
NETUID = 27
CHEATERS = ("refuser", "box-a", "box-b")
MOCK_GPU = GpuSpec(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 10**9, uuid="GPU-mock-0")


def _specs(gpus: list[GpuSpec]) -> MachineSpecs:
    return fixed_specs(gpus, cpu_model="demo cpu", miner_version="cheater")


def _app(workdir: Path, name: str, index: int, wallet: bt.Wallet):  # noqa: ANN202 - a FastAPI app
    data = workdir / name
    low = 43500 + index * 50
    ports = (low, low + 49)
    limits = ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10)
    store = LeaseStore(data / "leases.db")
    if name == "refuser":
        manager: AllocationManager = RefusingManager(
            store, EmbeddedBackend(data, bind_host="127.0.0.1", port_range=ports), [MOCK_GPU], limits
        )
        specs = _specs([MOCK_GPU])
    else:
        backend = OneBoxBackend(data, workdir / "box" / "host_key", bind_host="127.0.0.1", port_range=ports)
        manager, specs = AllocationManager(store, backend, [], limits), _specs([])
    return build_miner_app(KeyWallet.from_wallet(wallet), None, manager, lambda: specs, ServerLimits())


async def run(workdir: Path, chain_path: Path) -> None:

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    chain = connect(f"sim:{chain_path}", NETUID)
    tasks = []
    try:
        for index, name in enumerate(CHEATERS):
            wallet = bt.Wallet(name=name, hotkey="default", path=str(workdir / "wallets"))
            port = free_port()
            app = _app(workdir, name, index, wallet)
            tasks.append(asyncio.create_task(serve(app, "127.0.0.1", port, stop)))
            await asyncio.sleep(0.3)
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
