"""``register.py logs LEASE``: a lease's own logs from its miner, to its owner only.

Against the real miner app on 127.0.0.1 with real wallets: the embedded backend's session log
(logins, each session's command and how it ended) and, marked ``docker``, a Docker lease's
container logs (its sshd's log of the login).
"""

from __future__ import annotations

import asyncio

import pytest
from shellflow import allocate, cli, cli_text

from compute.chain import connect
from compute.operator import EXIT_OK, EXIT_USAGE
from compute.protocol import LeaseLogsRequest
from compute.transport import MinerClient, Rejected, load_wallet


def test_logs_show_an_embedded_leases_logins_and_sessions(subnet):
    lease = allocate(subnet)
    code, body = cli(subnet, "operator_a", "exec", lease, "--", "echo hi; exit 3")
    assert code == 3, body
    code, body = cli(subnet, "operator_a", "logs", lease)
    assert code == EXIT_OK, body
    assert body["source"] == "embedded session log" and body["lease_id"] == lease
    text = "\n".join(body["lines"])
    assert "login from 127.0.0.1 (ssh-ed25519 key)" in text
    assert "session: 'echo hi; exit 3'" in text and "session ended: exit status 3" in text
    code, body = cli(subnet, "operator_a", "logs", "last", "--tail", "1")
    assert code == EXIT_OK and body["lines"] == [body["lines"][-1]] and "session ended" in body["lines"][0]
    code, out, _ = cli_text(subnet, "operator_a", "logs", lease[:8])
    assert code == EXIT_OK and f"embedded session log of lease {lease}" in out and "session: 'echo hi" in out
    code, _, err = cli_text(subnet, "operator_a", "logs", lease, "--tail", "0")
    assert code == EXIT_USAGE and err.count("\n") == 1


def test_another_hotkey_cannot_read_a_leases_logs(subnet):
    lease = allocate(subnet)

    async def as_operator_b() -> None:
        chain = connect(f"sim:{subnet.chain_path}", 27)
        try:
            [endpoint] = [n.axon for n in chain.metagraph().neurons if n.hotkey == subnet.miner_hotkey]
        finally:
            chain.close()
        wallet = load_wallet("operator_b", "default", str(subnet.wallets_dir))
        async with MinerClient(wallet, timeout=10) as client:
            await client.call(endpoint, subnet.miner_hotkey, LeaseLogsRequest(lease_id=lease))

    with pytest.raises(Rejected) as refused:
        asyncio.run(as_operator_b())
    assert refused.value.code == "not_owner"


@pytest.mark.docker
def test_logs_show_a_docker_leases_container_logs(docker_subnet):
    lease = allocate(docker_subnet)
    code, body = cli(docker_subnet, "operator_a", "exec", lease, "--", "true")
    assert code == EXIT_OK, body
    code, body = cli(docker_subnet, "operator_a", "logs", lease)
    assert code == EXIT_OK, body
    assert body["source"] == "docker container logs"
    assert any("Accepted publickey" in line for line in body["lines"]), body["lines"]
