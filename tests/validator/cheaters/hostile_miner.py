"""Miners whose every text is hostile (test code only): ``python hostile_miner.py WORKDIR CHAIN``.

Serves, on one event loop, the real miner app (signed transport, embedded SSH backend) for two
hotkeys whose wallets the test made under ``WORKDIR/wallets``, and publishes them on the chain:

- ``refuser``: specs, templates and lease health full of terminal control codes and rich markup;
  every allocate is refused with such a reason (``[/]`` included: rich's ``MarkupError``);
- ``worker``: leases like an honest miner, but its lease's ``python3`` is a worker whose every
  answer is ``{"ok": false, "error": HOSTILE}``, and its lease health reason is hostile too.

A hostile miner runs its own code: this one turns off the protocol's sanitiser in its own process
(``compute.peertext.printable``), so its answers carry the raw bytes to the other side.
Writes ``WORKDIR/hostile.ready`` (name -> endpoint) and runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import bittensor as bt

import compute.peertext

compute.peertext.printable = lambda text, limit=None: str(text)  # this miner sends raw text

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits  # noqa: E402
from compute.allocation.docker.templates import TemplateCatalog  # noqa: E402
from compute.chain import connect  # noqa: E402
from compute.localnet.processes import free_port  # noqa: E402
from compute.miner import build_miner_app  # noqa: E402
from compute.miner.specs import fixed_specs  # noqa: E402
from compute.protocol import (  # noqa: E402
    ErrorCode,
    GpuSpec,
    LeaseHealth,
    LeaseInfo,
    RequestFailed,
    TemplateInfo,
)
from compute.transport import KeyWallet, ServerLimits, serve  # noqa: E402

# rich markup that does not parse ([/] closes nothing), an ESC screen clear, an OSC window title, a
# bell, a carriage return, a right-to-left override and a line separator
HOSTILE = "[/] \x1b[2J\x1b]0;pwned\x07\r[bold red]FAKE OK\x1b[0m \u202eevil\u2028x"
GPU = GpuSpec(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 10**9, uuid="GPU-hostile-0")
CHEAT_BIN = Path(__file__).parent


class Refuser(AllocationManager):
    async def allocate(self, owner_hotkey, request, receipt=None):  # noqa: ANN001, ANN201
        raise RequestFailed(ErrorCode.BACKEND_ERROR, HOSTILE, 400)


class HostileHealth:
    """Stands in for the lease watch: every lease is 'lost' for a hostile reason."""

    def annotate(self, lease: LeaseInfo) -> LeaseInfo:
        now = time.time()
        health = LeaseHealth(status="lost", checked_at=now, down_since=now - 3600, reason=HOSTILE)
        return lease.model_copy(update={"health": health})


def worker_bin(workdir: Path) -> Path:
    directory = workdir / "hostile-bin"
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "python3"
    worker = CHEAT_BIN / "cheat_worker.py"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -u "{worker}" hostiletext\n')
    wrapper.chmod(0o755)
    return directory


def _worker_offset() -> int:
    """``portspace.worker_offset`` (this file also runs as a script, where tests/ is not on the path)."""
    digits = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    return 7000 * (int(digits) % 3 if digits.isdigit() else 0)


def _app(workdir: Path, name: str, index: int, wallet: bt.Wallet):  # noqa: ANN202 - a FastAPI app
    data = workdir / name
    low = _worker_offset() + 45000 + (os.getpid() % 40) * 50 + index * 20
    prefix = [worker_bin(workdir)] if name == "worker" else []
    backend = EmbeddedBackend(data, bind_host="127.0.0.1", port_range=(low, low + 19), path_prefix=prefix)
    limits = ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10)
    kind = Refuser if name == "refuser" else AllocationManager
    manager = kind(LeaseStore(data / "leases.db"), backend, [GPU], limits)
    gpu = GPU.model_copy(update={"name": f"NVIDIA H100 {HOSTILE}", "uuid": f"GPU-{HOSTILE}"})
    specs = fixed_specs([gpu], cpu_model=f"cpu {HOSTILE}", miner_version="1.0\x1b[5m")
    template = TemplateInfo(
        name="default", image="compute-base:cpu", version=HOSTILE[:60], kind="cpu", description=HOSTILE
    )
    catalog = TemplateCatalog((template,), "default")
    return build_miner_app(
        KeyWallet.from_wallet(wallet),
        None,
        manager,
        lambda: specs,
        ServerLimits(),
        templates=catalog,
        monitor=HostileHealth(),  # type: ignore[arg-type]
    )


async def run(workdir: Path, chain_path: Path) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    chain = connect(f"sim:{chain_path}", 27)
    tasks, ready = [], {}
    try:
        for index, name in enumerate(("refuser", "worker")):
            wallet = bt.Wallet(name=name, hotkey="default", path=str(workdir / "wallets"))
            port = free_port()
            tasks.append(
                asyncio.create_task(serve(_app(workdir, name, index, wallet), "127.0.0.1", port, stop))
            )
            await asyncio.sleep(0.3)
            chain.serve(wallet, "127.0.0.1", port)
            ready[name] = f"127.0.0.1:{port}"
    finally:
        chain.close()
    (workdir / "hostile.ready").write_text(json.dumps(ready))
    await stop.wait()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(run(Path(sys.argv[1]), Path(sys.argv[2])))
