"""The PoG session over real SSH to an embedded-backend lease: fixed bootstrap, pinned host key."""

from __future__ import annotations

import time
from pathlib import Path

import asyncssh
import pytest
from validator_helpers import port_block

from compute.allocation import EmbeddedBackend, LeaseRecord
from compute.pog import choose_openings, new_challenge, verify
from compute.validator import BOOTSTRAP, PogSession, SshFailed, bootstrap_command


@pytest.fixture
async def lease(tmp_path: Path):
    key = asyncssh.generate_private_key("ssh-ed25519")
    public = " ".join(key.export_public_key().decode().split()[:2])
    backend = EmbeddedBackend(tmp_path, bind_host="127.0.0.1", port_range=port_block())
    record = LeaseRecord(
        "b" * 32, "hk", "validation", (), 1, 2048, 1, 64, 0, public, time.time(), time.time() + 300
    )
    endpoint = await backend.start(record)
    yield endpoint, key
    await backend.stop(record.lease_id)


def test_bootstrap_command_is_fixed_text() -> None:
    assert bootstrap_command("cpu") == bootstrap_command("cpu")
    assert "'" not in BOOTSTRAP  # safe inside one single-quoted shell word
    with pytest.raises(ValueError):
        bootstrap_command("cpu; rm -rf /")


async def test_session_runs_worker_and_its_proof_verifies(lease) -> None:
    endpoint, key = lease
    session = await PogSession.open(
        endpoint.host, endpoint.ssh_port, endpoint.username, key, endpoint.host_key, timeout=30, device="cpu"
    )
    async with session:
        devices = await session.info(60)
        assert devices[0].name == "cpu"
        challenge = new_challenge("fp32", 32, 4096, 32, 1)
        timed = await session.commit(challenge, 30)
        assert timed.elapsed_s > 0
        request = choose_openings(challenge)
        opening = await session.open_rows(request, challenge.p, 30)
    assert verify(challenge, timed.commitment, request, opening).ok


async def test_wrong_host_key_is_refused(lease) -> None:
    endpoint, key = lease
    impostor = " ".join(asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[:2])
    with pytest.raises(SshFailed):
        await PogSession.open(endpoint.host, endpoint.ssh_port, endpoint.username, key, impostor, timeout=10)
