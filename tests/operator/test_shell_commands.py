"""``register.py ssh|exec|cp`` over real SSH into real leases: embedded backend and Docker."""

from __future__ import annotations

import random
import time
import uuid

import asyncssh
import pytest
from shellflow import exec_cp_ssh_journey, host_key_mismatch_journey

from compute.allocation import EmbeddedBackend, LeaseRecord
from compute.allocation.embedded import sandbox
from compute.operator import LeaseAccess, LeaseShell, TransferFailed, write_known_hosts
from compute.protocol import SshAccess


@pytest.mark.slow
def test_exec_cp_and_ssh_reach_an_embedded_lease(subnet, tmp_path):
    exec_cp_ssh_journey(subnet, tmp_path)


@pytest.mark.slow
def test_a_lease_with_another_host_key_gets_no_command_or_file(subnet, tmp_path):
    host_key_mismatch_journey(subnet, tmp_path)


@pytest.mark.docker
def test_exec_cp_and_ssh_reach_a_docker_lease(docker_subnet, tmp_path):
    exec_cp_ssh_journey(docker_subnet, tmp_path)


@pytest.mark.docker
def test_a_docker_lease_with_another_host_key_gets_no_command_or_file(docker_subnet, tmp_path):
    host_key_mismatch_journey(docker_subnet, tmp_path)


async def test_a_lease_without_sftp_gets_single_files_through_cat(tmp_path):
    """A sandboxed embedded lease (the backend off the local demo) serves no SFTP: files are
    streamed through ``cat`` over the same pinned connection; a directory is a clear refusal."""
    if not sandbox.available():
        pytest.skip("the lease sandbox needs root on Linux")
    key = asyncssh.generate_private_key("ssh-ed25519")
    (tmp_path / "id").write_bytes(key.export_private_key())
    (tmp_path / "id").chmod(0o600)
    base = random.randrange(200, 590) * 100
    paths = sandbox.SandboxPaths.for_miner(tmp_path / "wallets", tmp_path / "data")
    backend = EmbeddedBackend(
        tmp_path / "data", bind_host="127.0.0.1", port_range=(base, base + 99), sandbox=paths
    )
    now = time.time()
    record = LeaseRecord(uuid.uuid4().hex, "5" + "D" * 47, "rental", (), 1, 512, 5, 0, 0,
                         key.export_public_key("openssh").decode().strip(), now, now + 600)  # fmt: skip
    endpoint = await backend.start(record)
    try:
        access = SshAccess(
            host=endpoint.host, port=endpoint.ssh_port, username=endpoint.username, host_key=endpoint.host_key
        )
        known = write_known_hosts(tmp_path / "known", record.lease_id, access)
        lease = LeaseAccess(
            record.lease_id, endpoint.host, endpoint.ssh_port, endpoint.username, known, tmp_path / "id"
        )
        payload = tmp_path / "model.bin"
        payload.write_bytes(bytes(range(256)) * 4096)  # 1 MiB, streamed
        async with await LeaseShell.open(lease) as shell:
            await shell.run("mkdir -p out", timeout=20)
            await shell.put([payload], "out")  # into a directory
            await shell.put([payload], "copy.bin")  # to a file name
            assert (
                await shell.run("cmp out/model.bin copy.bin && wc -c < copy.bin")
            ).stdout.strip() == "1048576"
            await shell.get(["copy.bin"], tmp_path / "back.bin")
            assert (tmp_path / "back.bin").read_bytes() == payload.read_bytes()
            with pytest.raises(TransferFailed, match="no SFTP"):
                await shell.put([tmp_path / "known"], "dir", recursive=True)
            with pytest.raises(TransferFailed, match="download of missing"):
                await shell.get(["missing"], tmp_path / "x")
            assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()
    finally:
        await backend.stop(record.lease_id)
