"""Files the Docker backend places inside a lease container, as in-memory tar archives.

Builds the sshd configuration (key-only, no passwords, ed25519 host key only) and the tar
streams handed to ``container.put_archive``. Caller-supplied strings reach the container only
as file *contents* here, never through a shell, a Dockerfile or a command line.

This module does no Docker calls and no validation of keys (``sshkeys.validate_public_key``
does that before anything gets here).
"""

from __future__ import annotations

import io
import tarfile
import time
from dataclasses import dataclass

HOST_KEY_PATH = "etc/ssh/ssh_host_ed25519_key"
SSHD_CONFIG_PATH = "etc/ssh/sshd_config"
SSH_DIR = "root/.ssh"
AUTHORIZED_KEYS_PATH = f"{SSH_DIR}/authorized_keys"
USERNAME = "root"


@dataclass(frozen=True)
class SshdOptions:
    """The few sshd settings a miner may change; everything else is fixed below."""

    allow_tcp_forwarding: bool = False
    client_alive_interval_s: int = 30


def sshd_config(options: SshdOptions = SshdOptions()) -> str:
    """The complete sshd_config a lease container runs with (replaces the image's own)."""
    forwarding = "yes" if options.allow_tcp_forwarding else "no"
    lines = [
        "# Written by the compute miner's Docker backend; replaced at every key change.",
        "Port 22",
        f"HostKey /{HOST_KEY_PATH}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "AuthorizedKeysFile .ssh/authorized_keys",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitEmptyPasswords no",
        "HostbasedAuthentication no",
        "UsePAM no",
        "StrictModes yes",
        "MaxAuthTries 3",
        "LoginGraceTime 30",
        f"AllowTcpForwarding {forwarding}",
        "AllowAgentForwarding no",
        "AllowStreamLocalForwarding no",
        "GatewayPorts no",
        "PermitTunnel no",
        "X11Forwarding no",
        "PermitUserEnvironment no",
        "PrintMotd no",
        f"ClientAliveInterval {options.client_alive_interval_s}",
        "ClientAliveCountMax 4",
        "Subsystem sftp internal-sftp",
    ]
    return "\n".join(lines) + "\n"


def _add_file(tar: tarfile.TarFile, path: str, data: bytes, mode: int, now: float) -> None:
    info = tarfile.TarInfo(path)
    info.size = len(data)
    info.mode = mode
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = int(now)
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, path: str, mode: int, now: float) -> None:
    info = tarfile.TarInfo(path)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = int(now)
    tar.addfile(info)


def lease_archive(host_private_key: bytes, host_public_line: str, authorized_key: str, config: str) -> bytes:
    """Tar (rooted at ``/``) with the host key, sshd_config and the renter's authorized_keys."""
    now = time.time()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_file(tar, HOST_KEY_PATH, host_private_key, 0o600, now)
        _add_file(tar, f"{HOST_KEY_PATH}.pub", (host_public_line + "\n").encode("ascii"), 0o644, now)
        _add_file(tar, SSHD_CONFIG_PATH, config.encode("ascii"), 0o644, now)
        _add_dir(tar, SSH_DIR, 0o700, now)
        _add_file(tar, AUTHORIZED_KEYS_PATH, (authorized_key + "\n").encode("ascii"), 0o600, now)
    return buf.getvalue()


def authorized_keys_archive(authorized_key: str, name: str = "authorized_keys") -> bytes:
    """Tar (rooted at ``/root/.ssh``) holding one authorized_keys file named ``name``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_file(tar, name, (authorized_key + "\n").encode("ascii"), 0o600, time.time())
    return buf.getvalue()
