"""The cheat collateral exists for: a miner that kills a renter's lease inside its signed term.

:class:`LeaseKillerManager` serves validators honestly (its PoG leases work, so it earns) and
rents to renters as usual, then stops every rental's SSH server ``kill_after_s`` seconds after it
started, without ending the lease in its books (as a miner reclaiming a GPU for a better-paying
customer would). ``python -m compute.localnet.lease_killer WORKDIR CHAIN_PATH NAME KILL_AFTER_S``
serves it as the demo's ``killer`` miner (embedded backend, its real API, its endpoint published
on the simulated chain) until SIGTERM. Demo and tests only: nothing in the miner imports it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import bittensor as bt

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits, Receipt
from compute.chain import connect
from compute.localnet.processes import free_port
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.protocol import AllocateRequest, LeaseInfo
from compute.transport import AccessPolicy, KeyWallet, ServerLimits, serve

log = logging.getLogger("compute.localnet.lease_killer")
NETUID = 27


class LeaseKillerManager(AllocationManager):
    """Rentals die ``kill_after_s`` after they start; the store still calls them active."""

    def __init__(self, *args: Any, kill_after_s: float = 5.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill_after_s = kill_after_s
        self.killed: list[str] = []
        self._tasks: set[asyncio.Task] = set()

    async def allocate(
        self, owner_hotkey: str, request: AllocateRequest, receipt: Receipt | None = None
    ) -> LeaseInfo:
        info = await super().allocate(owner_hotkey, request, receipt)
        if request.purpose == "rental":
            task = asyncio.create_task(self._kill(info.lease_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return info

    async def _kill(self, lease_id: str) -> None:
        await asyncio.sleep(self.kill_after_s)
        await self.backend.stop(lease_id)
        self.killed.append(lease_id)
        log.warning("killed the renter's lease=%s inside its term (kept it 'active')", lease_id)


def build(  # noqa: ANN201
    workdir: Path,
    name: str,
    wallet: bt.Wallet,
    chain_metagraph,  # noqa: ANN001
    kill_after_s: float,
    pace_gflops: float = 0.0,
):
    """The killer's FastAPI app over an embedded backend in ``workdir/name`` (its GEMMs paced at
    ``pace_gflops`` like the demo's other miners: ``LocalNet.paced``)."""
    data = workdir / name
    low = 44500
    backend = EmbeddedBackend(
        data, ssh_host="127.0.0.1", bind_host="127.0.0.1", port_range=(low, low + 49), pace_gflops=pace_gflops
    )
    limits = ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10)
    manager = LeaseKillerManager(
        LeaseStore(data / "leases.db"), backend, [], limits, kill_after_s=kill_after_s
    )
    specs = fixed_specs([], cpu_model="demo cpu", miner_version="lease-killer")
    policy = AccessPolicy(chain_metagraph, min_stake=100.0, require_permit=True, refresh_s=5.0)
    return build_miner_app(KeyWallet.from_wallet(wallet), policy, manager, lambda: specs, ServerLimits())


async def run(
    workdir: Path, chain_path: Path, name: str, kill_after_s: float, pace_gflops: float = 0.0
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    chain = connect(f"sim:{chain_path}", NETUID)
    wallet = bt.Wallet(name=name, hotkey="default", path=str(workdir / "wallets"))
    port = free_port()
    app = build(workdir, name, wallet, chain.metagraph, kill_after_s, pace_gflops)
    task = asyncio.create_task(serve(app, "127.0.0.1", port, stop))
    await asyncio.sleep(0.3)
    chain.serve(wallet, "127.0.0.1", port)
    log.info(
        "%s hotkey=%s serving 127.0.0.1:%d, killing rentals after %.0fs",
        name,
        wallet.hotkey.ss58_address[:10],
        port,
        kill_after_s,
    )
    await stop.wait()
    await task
    chain.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (4, 5):
        print(
            "usage: python -m compute.localnet.lease_killer WORKDIR CHAIN_PATH NAME KILL_AFTER_S [PACE_GFLOPS]",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    pace = float(args[4]) if len(args) == 5 else 0.0
    asyncio.run(run(Path(args[0]), Path(args[1]), args[2], float(args[3]), pace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
