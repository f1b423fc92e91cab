"""SSH keys and host pinning for leases: the renter's key pair, known_hosts files, the ssh command.

- ``load_public_key(path)``: the renter's own OpenSSH public key file (``--ssh-key``); the private
  half is assumed to sit beside it without ``.pub`` and is never read.
- ``generate_keypair(keys_dir)``: a fresh ed25519 pair; the private key is created with mode 0600
  (in a 0700 directory) so it is never readable by others, not even for an instant.
- ``write_known_hosts(...)``: one file per lease holding the miner-reported host key, so that
  ``ssh -o StrictHostKeyChecking=yes`` refuses any other host.
- ``ssh_command(...)``: the ready-to-paste command line, every part shell-quoted.

Deliberately not here: opening SSH sessions (``compute.operator.shell``) and storing anything
in SQLite (the lease book keeps only paths).
"""

from __future__ import annotations

import os
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from compute.operator.errors import KeyFileError, Refused
from compute.protocol import SshAccess

MAX_KEY_FILE_BYTES = 16_384
PRIVATE_MODE = 0o600
DIR_MODE = 0o700


@dataclass(frozen=True)
class RenterKey:
    """The key a lease is opened with: its public line and, when known, the private key file."""

    public_line: str
    private_path: Path | None
    generated: bool  # True when this tool created the pair (and may delete it later)


def _normalise_public(text: str, source: str) -> str:
    line = text.strip()
    if not line or "\n" in line:
        raise KeyFileError(f"{source}: expected exactly one OpenSSH public key line")
    try:
        key = asyncssh.import_public_key(line)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise KeyFileError(f"{source}: not an OpenSSH public key ({exc})") from exc
    return key.export_public_key("openssh").decode("ascii").strip()


def load_public_key(path: str | Path) -> RenterKey:
    """Read the renter's public key file; refuse private keys and anything that does not parse."""
    pub = Path(path).expanduser()
    try:
        if pub.stat().st_size > MAX_KEY_FILE_BYTES:
            raise KeyFileError(f"{pub}: too large to be a public key")
        text = pub.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read public key file {pub}: {exc}") from exc
    if "PRIVATE KEY" in text:
        raise KeyFileError(f"{pub} is a private key: pass the public key file (usually *.pub)")
    line = _normalise_public(text, str(pub))
    private = pub.with_suffix("") if pub.suffix == ".pub" else None
    return RenterKey(line, private if private is not None and private.exists() else None, False)


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (mode 0700) if needed and tighten it if it already exists."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, DIR_MODE)
    return path


def generate_keypair(keys_dir: Path, comment: str = "compute-lease") -> RenterKey:
    """A fresh ed25519 key pair under ``keys_dir``: private file 0600, public file beside it."""
    ensure_private_dir(keys_dir)
    key = asyncssh.generate_private_key("ssh-ed25519", comment=comment)
    name = f"lease-{secrets.token_hex(6)}"
    private_path = keys_dir / name
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key.export_private_key("openssh"))
    public_line = key.export_public_key("openssh").decode("ascii").strip()
    (keys_dir / f"{name}.pub").write_text(public_line + "\n", encoding="ascii")
    return RenterKey(public_line, private_path, True)


def remove_generated_key(private_path: Path) -> None:
    """Delete a key pair this tool generated (after a key exchange or once a lease ended)."""
    for path in (private_path, private_path.with_name(private_path.name + ".pub")):
        path.unlink(missing_ok=True)


def known_hosts_line(host: str, port: int, host_key: str) -> str:
    """The known_hosts entry pinning ``host_key`` for ``host:port`` (OpenSSH bracket syntax)."""
    try:
        key = asyncssh.import_public_key(host_key.strip())
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise Refused(f"the miner reported an invalid SSH host key: {exc}") from exc
    if not host or any(ch.isspace() or ch in ",[]" for ch in host):
        raise Refused(f"the miner reported an invalid SSH host {host!r}")
    key_text = " ".join(key.export_public_key("openssh").decode("ascii").split()[:2])
    target = host if port == 22 else f"[{host}]:{port}"
    return f"{target} {key_text}"


def write_known_hosts(hosts_dir: Path, lease_id: str, access: SshAccess) -> Path:
    """Write (or replace) the per-lease known_hosts file and return its path."""
    ensure_private_dir(hosts_dir)
    path = hosts_dir / f"{lease_id}.known_hosts"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(known_hosts_line(access.host, access.port, access.host_key) + "\n", encoding="ascii")
    os.replace(tmp, path)
    return path


def ssh_command(access: SshAccess, known_hosts: Path, private_key: Path | None) -> str:
    """``ssh -i KEY -p PORT -o UserKnownHostsFile=F -o StrictHostKeyChecking=yes USER@HOST``."""
    parts = ["ssh"]
    if private_key is not None:
        parts += ["-i", str(private_key), "-o", "IdentitiesOnly=yes"]
    parts += [
        "-p",
        str(access.port),
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        f"{access.username}@{access.host}",
    ]
    return " ".join(shlex.quote(part) for part in parts)
