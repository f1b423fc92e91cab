"""neurons/miner.py as a real process on a simulated chain: crash, restart, clean shutdown."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from minerkit import (
    NETUID,
    free_port,
    miner_args,
    new_renter_key,
    port_block,
    ssh_run,
    start_miner,
    wait_healthy,
)

from compute.protocol import AllocateRequest, LeaseStatusRequest, Requirements
from compute.transport import MinerClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
async def test_lease_survives_miner_kill_and_restart(tmp_path: Path, wallets, sim_network):
    port, (low, high) = free_port(), port_block()
    args = miner_args(tmp_path, sim_network, NETUID, port=port, backend="embedded")
    args += ["--miner.ssh_port_range", f"{low}-{high}"]
    log, endpoint, hotkey = tmp_path / "miner.log", f"127.0.0.1:{port}", wallets["miner"].hotkey.ss58_address
    key = new_renter_key()
    async with MinerClient(wallets["validator"], timeout=30) as client:
        proc = start_miner(args, log)
        try:
            await wait_healthy(client, endpoint, hotkey, proc, log)
            request = AllocateRequest(
                requirements=Requirements(gpu_count=0), duration_s=600, ssh_public_key=key.public_line
            )
            lease = (await client.call(endpoint, hotkey, request)).lease
            assert (await ssh_run(lease.ssh, key, "echo before")).stdout == "before\n"
            proc.kill()
            proc.wait(10)
            proc = start_miner(args, log)
            await wait_healthy(client, endpoint, hotkey, proc, log)
            after = (await client.call(endpoint, hotkey, LeaseStatusRequest(lease_id=lease.lease_id))).lease
            assert (after.state, after.owner_hotkey, after.ssh) == ("active", client.hotkey, lease.ssh)
            assert (await ssh_run(after.ssh, key, "echo after")).stdout == "after\n"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@pytest.mark.slow
def test_miner_refuses_unregistered_hotkey_with_clear_error(tmp_path: Path, wallets, sim_network):
    args = miner_args(tmp_path, sim_network, NETUID, wallet="stranger", backend="embedded")
    done = subprocess.run(
        [sys.executable, str(ROOT / "neurons" / "miner.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert f"is not registered on netuid {NETUID}; register with `btcli subnets register" in done.stderr


@pytest.mark.slow
def test_miner_refuses_missing_wallet_and_bad_flags(tmp_path: Path):
    base = [sys.executable, str(ROOT / "neurons" / "miner.py"), "--env_file", str(tmp_path / "none.env")]
    missing = subprocess.run(
        [*base, "--wallet.path", str(tmp_path / "nowhere"), "--subtensor.network", "sim:/x"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert missing.returncode == 1 and "cannot be loaded" in missing.stderr
    bad = subprocess.run(
        [*base, "--miner.ssh_port_range", "9-8"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert bad.returncode == 2 and "--miner.ssh_port_range" in bad.stderr
