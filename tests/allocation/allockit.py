"""Helpers for allocation tests: renter SSH keys and a pinned asyncssh client."""

from __future__ import annotations

from dataclasses import dataclass

import asyncssh


@dataclass(frozen=True)
class RenterKey:
    private: asyncssh.SSHKey
    public_line: str


def new_renter_key() -> RenterKey:
    key = asyncssh.generate_private_key("ssh-ed25519")
    return RenterKey(key, key.export_public_key("openssh").decode().strip())


async def ssh_run(
    host: str,
    port: int,
    host_key: str,
    key: RenterKey,
    command: str,
    username: str = "lease",
    stdin: str | None = None,
) -> asyncssh.SSHCompletedProcess:
    """Connect with the host key pinned (no other key accepted) and run one command."""
    pinned = ([asyncssh.import_public_key(host_key)], [], [])
    async with asyncssh.connect(
        host,
        port,
        username=username,
        client_keys=[key.private],
        known_hosts=pinned,
        agent_path=None,
        config=None,
        connect_timeout=10,
    ) as conn:
        return await conn.run(command, input=stdin, timeout=20)
