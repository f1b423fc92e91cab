"""Who is who across the ss58 / H160 seam, and the machine a deposit is for.

Bittensor's EVM accounts (H160, secp256k1) and native accounts (ss58, sr25519) are separate
signing domains. The chain maps them one way only: an H160's *mirror* ss58 account is
``blake2_256("evm:" ++ h160)`` (``pallet_evm::HashedAddressMapping<BlakeTwo256>``), which is where
TAO sent from a native wallet lands on the EVM side. Nothing maps a hotkey to an H160 it could sign
with, so a hotkey *associates* an EVM key on a subnet (extrinsic ``associate_evm_key``, signed by
the hotkey and proven by the EVM key); contracts read the association through the UID-lookup
precompile. The address math is the SDK's (``bittensor.evm``); this module adds the
bytes32 forms the contract takes and the machine identity.

What it deliberately does not do: hold keys (``compute.collateral.keys``) or touch a chain.
"""

from __future__ import annotations

from collections.abc import Iterable

from bittensor.evm import h160_to_ss58, normalize_h160, ss58_to_pubkey
from eth_utils import keccak

from compute.collateral.errors import EvmKeyError

MACHINE_DOMAIN = b"compute-machine/1"

__all__ = ["CPU_MACHINE", "h160_to_ss58", "hotkey_bytes32", "machine_id", "machine_of", "checked_h160"]


def hotkey_bytes32(ss58: str) -> bytes:
    """The 32-byte public key of an ss58 address (what the metagraph precompile returns)."""
    try:
        return bytes.fromhex(ss58_to_pubkey(ss58)[2:])
    except Exception as error:  # the SDK's decoder raises several types for bad input
        raise EvmKeyError(f"not an ss58 address: {ss58!r}") from error


def checked_h160(address: str) -> str:
    """An EVM address, 0x-prefixed and lowercase; EvmKeyError when malformed."""
    try:
        return normalize_h160(address)
    except ValueError as error:
        raise EvmKeyError(str(error)) from None


def machine_id(gpu_uuids: Iterable[str], host_key: str | None = None) -> bytes:
    """The identity a deposit is for: keccak of the sorted GPU UUIDs (and the host key, if any).

    The validator proves the UUIDs inside its lease (presence work); a machine whose GPU set
    changes is a new machine (its history and its deposit start over). A machine without GPUs
    (the CPU demo) is named by its host key alone.
    """
    uuids = sorted({u.strip() for u in gpu_uuids if u.strip()})
    if not uuids and not host_key:
        raise ValueError("a machine needs GPU UUIDs or a host key")
    parts = [MACHINE_DOMAIN, *(u.encode() for u in uuids)]
    if host_key:
        parts.append(b"host:" + host_key.strip().encode())
    return keccak(b"\x00".join(parts))


# A machine without GPUs (the CPU demo): one per hotkey, since a lease's host key names one lease only.
CPU_MACHINE = keccak(MACHINE_DOMAIN + b"\x00cpu")


def machine_of(gpu_uuids: Iterable[str]) -> bytes:
    """The machine a validator reads a miner's deposit for: its proven GPU set, or ``CPU_MACHINE``."""
    uuids = [u for u in gpu_uuids if u.strip()]
    return machine_id(uuids) if uuids else CPU_MACHINE
