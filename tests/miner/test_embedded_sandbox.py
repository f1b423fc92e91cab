"""Embedded leases cannot read the miner's keys or each other's.

The real ``neurons/miner.py`` with the embedded backend on a simulated chain, real wallets, real SSH
into two leases. With ``--miner.lease_sandbox on`` (what ``auto`` does anywhere but the local
demo) a renter's shell runs as the lease's own uid with the miner's home, wallets and data hidden:
it cannot read the hotkey file (the mnemonic), the lease database or the other lease's host key,
while its own home and Python work. ``off`` (the local demo only) shows what the renter could read
before. Off the demo, ``off`` is refused at start.
"""

from __future__ import annotations

import os
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

from compute.allocation.embedded import sandbox
from compute.protocol import AllocateRequest, Requirements
from compute.settings import parse_miner
from compute.transport import MinerClient


async def _two_leases(client: MinerClient, endpoint: str, hotkey: str):  # noqa: ANN202
    key = new_renter_key()
    request = AllocateRequest(
        requirements=Requirements(gpu_count=0), duration_s=600, ssh_public_key=key.public_line
    )
    a = (await client.call(endpoint, hotkey, request)).lease
    b = (await client.call(endpoint, hotkey, request)).lease
    return key, a, b


@pytest.mark.parametrize("mode", ["on", "off"])
@pytest.mark.slow
async def test_a_renters_shell_cannot_read_the_miners_keys(
    tmp_path: Path, wallets, sim_network, mode
) -> None:
    if mode == "on" and not sandbox.available():
        pytest.skip("the lease sandbox needs root on Linux")
    port, (low, high) = free_port(), port_block()
    args = miner_args(tmp_path, sim_network, NETUID, port=port, backend="embedded")
    args += ["--miner.ssh_port_range", f"{low}-{high}", "--miner.lease_sandbox", mode]
    log, endpoint, hotkey = tmp_path / "miner.log", f"127.0.0.1:{port}", wallets["miner"].hotkey.ss58_address
    hotkey_file = tmp_path / "wallets" / "miner" / "hotkeys" / "default"
    data = tmp_path / "data"
    async with MinerClient(wallets["validator"], timeout=30) as client:
        proc = start_miner(args, log)
        try:
            await wait_healthy(client, endpoint, hotkey, proc, log)
            key, a, b = await _two_leases(client, endpoint, hotkey)
            steal = (
                f"cat '{hotkey_file}'; cat '{data}/embedded/{b.lease_id}/host_key'; "
                f"head -c 16 '{data}/leases.db' | od -c | head -1"
            )
            stolen = await ssh_run(a.ssh, key, steal)
            mine = await ssh_run(
                a.ssh, key, "echo work > ~/file && cat ~/file && id -u && python3 -c 'print(6*7)'"
            )
        finally:
            proc.kill()
            proc.wait(10)
    assert mine.exit_status == 0, mine.stderr
    assert mine.stdout.split()[0] == "work" and mine.stdout.split()[2] == "42"  # the lease itself works
    if mode == "off":  # the attack, without the sandbox: the mnemonic and a neighbour's host key
        assert "secretPhrase" in stolen.stdout and "OPENSSH PRIVATE KEY" in stolen.stdout
        return
    assert int(mine.stdout.split()[1]) >= sandbox.UID_BASE and int(mine.stdout.split()[1]) != os.getuid()
    assert "secretPhrase" not in stolen.stdout and "PRIVATE KEY" not in stolen.stdout
    assert "SQLite" not in stolen.stdout, stolen.stdout


def test_the_embedded_backend_without_its_sandbox_is_refused_off_the_demo(tmp_path: Path) -> None:
    from compute.miner.service import StartupError, embedded_sandbox

    settings = parse_miner(
        ["--subtensor.network", "test", "--miner.backend", "embedded", "--miner.lease_sandbox", "off",
         "--miner.data_dir", str(tmp_path), "--env_file", str(tmp_path / "none.env")],
        {},
    )  # fmt: skip
    with pytest.raises(StartupError, match="only for the local demo"):
        embedded_sandbox(settings)


def test_the_launcher_every_lease_command_starts_through_imports_only_what_it_uses() -> None:
    """Its start-up is on every sandboxed command's path: no site, no package, no dataclasses or
    pathlib, no ``ldconfig`` (the launcher was 55 ms a command with them, 27 ms without)."""
    import subprocess

    spec = sandbox.Spec("/nonexistent-home", sandbox.UID_BASE, sandbox.UID_BASE, (), ())
    argv = sandbox.command(spec, ["/bin/true"])
    assert argv[1:3] == ["-I", "-S"] and argv[3] == sandbox.SCRIPT
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:4], "{not json", "--", "/bin/true"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert done.returncode == 2 and "lease sandbox: a bad spec" in done.stderr, done.stderr
    imported = {
        line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    }
    assert {"ctypes", "json"} <= imported, imported
    assert not imported & {"site", "dataclasses", "pathlib", "subprocess", "ctypes.util", "compute"}, imported
