"""A miner whose lease database is write-locked by another process keeps answering.

The real ``neurons/miner.py`` (embedded backend, simulated chain, real wallets): a second process
opens ``leases.db`` and holds its write lock (``BEGIN IMMEDIATE``) for 12 s. Before, reads shared
the writer's connection and lock, and ``health`` answered 2 of 9 calls. Now every read has its own
WAL read connection: health and lease status keep answering within a second, a write asked for
meanwhile gets a clean 503 ``busy`` (never a 500), and succeeds once the lock is gone.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from minerkit import NETUID, free_port, miner_args, new_renter_key, port_block, start_miner, wait_healthy

from compute.protocol import (
    AllocateRequest,
    ErrorCode,
    ExtendLeaseRequest,
    HealthRequest,
    LeaseStatusRequest,
    Requirements,
)
from compute.transport import MinerClient, Rejected

HOLD_S = 12.0
LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


@pytest.mark.slow
async def test_reads_never_queue_behind_a_locked_writer(tmp_path: Path, wallets, sim_network) -> None:
    port, (low, high) = free_port(), port_block()
    args = miner_args(tmp_path, sim_network, NETUID, port=port, backend="embedded")
    args += ["--miner.ssh_port_range", f"{low}-{high}"]
    log, endpoint, hotkey = tmp_path / "miner.log", f"127.0.0.1:{port}", wallets["miner"].hotkey.ss58_address
    async with MinerClient(wallets["validator"], timeout=30) as client:
        proc = start_miner(args, log)
        try:
            await wait_healthy(client, endpoint, hotkey, proc, log)
            request = AllocateRequest(
                requirements=Requirements(gpu_count=0),
                duration_s=600,
                ssh_public_key=new_renter_key().public_line,
            )
            lease = (await client.call(endpoint, hotkey, request)).lease
            locker = subprocess.Popen(
                [sys.executable, "-c", LOCKER, str(tmp_path / "data" / "leases.db"), str(HOLD_S)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
            locked_at = time.monotonic()
            extend = asyncio.create_task(
                client.call(endpoint, hotkey, ExtendLeaseRequest(lease_id=lease.lease_id, duration_s=600))
            )
            latencies = []
            while time.monotonic() - locked_at < HOLD_S - 2:
                for call in (HealthRequest(), LeaseStatusRequest(lease_id=lease.lease_id)):
                    started = time.monotonic()
                    await client.call(endpoint, hotkey, call, timeout=5)
                    latencies.append(time.monotonic() - started)
                await asyncio.sleep(0.4)
            try:
                await extend
                refused = None
            except Rejected as exc:
                refused = exc
            locker.wait(30)
            assert len(latencies) >= 16 and max(latencies) <= 1.0, latencies
            assert refused is not None and (refused.status, refused.code) == (503, ErrorCode.BUSY)
            after = await client.call(
                endpoint, hotkey, ExtendLeaseRequest(lease_id=lease.lease_id, duration_s=600)
            )
            assert after.lease.expires_at == lease.expires_at + 600  # nothing lost: the retry works
        finally:
            proc.kill()
            proc.wait(10)
