"""SSH key helpers for rental backends: strict renter-key validation and host-key generation.

``validate_public_key`` is the single gate every caller-supplied OpenSSH public key passes
before a backend writes it anywhere; it accepts one ``TYPE BASE64 [COMMENT]`` line of a known
key type, checks that the base64 body decodes and embeds the same type, and returns the
normalised ``TYPE BASE64`` line (the comment is dropped). ``generate_host_key`` makes a fresh
ed25519 host key on the miner side so that a renter can pin it.

This module does no I/O and knows nothing about containers.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass

import asyncssh
from cryptography.hazmat.primitives.asymmetric import rsa

from compute.allocation.lease.backend import BackendError

MAX_PUBLIC_KEY_CHARS = 8192  # an RSA-16384 key is ~2.8k characters
MIN_RSA_BITS = 2048
ALLOWED_KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
    }
)
_KEY_LINE = re.compile(
    r"(?P<type>[a-z0-9-]{1,32}) (?P<body>[A-Za-z0-9+/]{16,}={0,2})(?: [\x20-\x7e]{1,256})?"
)


class InvalidPublicKey(BackendError):
    """A caller-supplied SSH public key was refused (format, type, size or strength)."""


@dataclass(frozen=True)
class HostKey:
    """A generated SSH host key: the private key file contents and the public key line."""

    private_openssh: bytes  # OpenSSH private key file, unencrypted (lives only in the container)
    public_line: str  # "ssh-ed25519 AAAA..." for the renter to pin


def validate_public_key(text: str) -> str:
    """Return the normalised ``TYPE BASE64`` line of ``text`` or raise ``InvalidPublicKey``."""
    if not isinstance(text, str):
        raise InvalidPublicKey("public key must be a string")
    if len(text) > MAX_PUBLIC_KEY_CHARS:
        raise InvalidPublicKey(f"public key longer than {MAX_PUBLIC_KEY_CHARS} characters")
    line = text.strip()
    if "\n" in line or "\r" in line or "\x00" in line:
        raise InvalidPublicKey("public key must be a single line")
    match = _KEY_LINE.fullmatch(line)
    if match is None:
        raise InvalidPublicKey("public key is not an OpenSSH 'TYPE BASE64 [COMMENT]' line")
    key_type, body = match.group("type"), match.group("body")
    if key_type not in ALLOWED_KEY_TYPES:
        raise InvalidPublicKey(f"unsupported key type {key_type!r}")
    try:
        blob = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidPublicKey("public key body is not valid base64") from exc
    if _embedded_type(blob) != key_type:
        raise InvalidPublicKey("public key body does not match its declared type")
    try:
        key = asyncssh.import_public_key(f"{key_type} {body}")
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise InvalidPublicKey(f"public key does not parse: {exc}") from exc
    if key_type == "ssh-rsa":
        pyca = key.pyca_key
        if not isinstance(pyca, rsa.RSAPublicKey):  # an ssh-rsa line always imports as one
            raise InvalidPublicKey("ssh-rsa public key did not import as an RSA key")
        bits = pyca.key_size
        if bits < MIN_RSA_BITS:
            raise InvalidPublicKey(f"RSA key of {bits} bits is below the {MIN_RSA_BITS}-bit minimum")
    return f"{key_type} {body}"


def _embedded_type(blob: bytes) -> str | None:
    """The key-type string at the start of an SSH wire-format public key blob."""
    if len(blob) < 4:
        return None
    (length,) = struct.unpack(">I", blob[:4])
    if length > 32 or len(blob) < 4 + length:
        return None
    try:
        return blob[4 : 4 + length].decode("ascii")
    except UnicodeDecodeError:
        return None


def generate_host_key() -> HostKey:
    """A fresh ed25519 SSH host key (private file bytes and the public line to pin)."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    public_line = key.export_public_key("openssh").decode("ascii").split()[:2]
    return HostKey(private_openssh=key.export_private_key("openssh"), public_line=" ".join(public_line))
