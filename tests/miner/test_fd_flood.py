"""4,000 unauthenticated connections from 40 addresses never stop a miner answering.

The real ``neurons/miner.py`` (embedded backend, simulated chain, real wallets) started with a
soft ``nofile`` of 1,024 under a hard limit: it raises the soft limit to the hard one, sizes its
connection caps against it (room left for everything else it keeps open), and keeps the last
slots for addresses that sent admitted requests. A flood process then holds connections sending
bodies one byte at a time from 40 loopback addresses while a validator calls: every call answered,
p95 <= 1 s, and never "Too many open files". Played twice: with a roomy hard limit, and with a hard
limit of 1,024 (where the caps shrink to fit).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from minerkit import NETUID, free_port, miner_args, port_block, wait_healthy

from compute.lab.harness.flood import flood_process, loopback_sources, p95, signed_latencies
from compute.protocol import HealthRequest
from compute.transport import MinerClient

ROOT = Path(__file__).resolve().parents[2]
ADDRESSES, PER_ADDRESS = 40, 100


def _start(args: list[str], log: Path, hard: int) -> subprocess.Popen:
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))

    return subprocess.Popen(
        [sys.executable, str(ROOT / "neurons" / "miner.py"), *args],
        stdout=open(log, "ab"),  # noqa: SIM115 - the child owns it
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)},
        preexec_fn=limits,  # noqa: PLW1509 - the limit pm2 or a shell would hand the miner
    )


def _soft_nofile(pid: int) -> int:
    line = next(
        x for x in Path(f"/proc/{pid}/limits").read_text().splitlines() if x.startswith("Max open files")
    )
    return int(line.split()[3])


@pytest.mark.soak
@pytest.mark.parametrize("hard", [8192, 1024])
async def test_a_connection_flood_from_many_addresses_never_starves_validators(
    tmp_path: Path, wallets, sim_network, hard: int
) -> None:
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < hard:
        pytest.skip(f"this machine's hard nofile limit is below {hard}")
    port, (low, high) = free_port(), port_block()
    args = miner_args(tmp_path, sim_network, NETUID, port=port, backend="embedded")
    args += ["--miner.ssh_port_range", f"{low}-{high}"]
    log, endpoint, hotkey = tmp_path / "miner.log", f"127.0.0.1:{port}", wallets["miner"].hotkey.ss58_address
    proc = _start(args, log, hard)
    flood = None
    try:
        async with MinerClient(wallets["validator"], timeout=10) as client:
            await wait_healthy(client, endpoint, hotkey, proc, log)  # an admitted call: a known address
            assert _soft_nofile(proc.pid) == hard  # raised to the hard limit at start
            flood = flood_process(
                port,
                sources=loopback_sources(ADDRESSES),
                connections=PER_ADDRESS,
                mode="slow-body",
                seconds=90,
            )

            async def call() -> object:
                return await client.call(endpoint, hotkey, HealthRequest(), timeout=5)

            import asyncio

            await asyncio.sleep(8.0)  # the flood is at full strength
            answered, failed = await signed_latencies(call, 40, interval_s=0.25)
        text = log.read_text()
        assert failed == 0 and p95(answered) <= 1.0, (failed, sorted(answered)[-5:])
        assert "Too many open files" not in text, text[-3000:]
        assert "refused" in text  # the flood met the caps
        assert proc.poll() is None
    finally:
        if flood is not None:
            flood.kill()
        proc.kill()
        proc.wait(10)
