"""Who is who across the ss58 / H160 seam.

Bittensor's EVM accounts (H160, secp256k1) and native accounts (ss58, sr25519) are separate
signing domains. The chain maps them one way only: an H160's *mirror* ss58 account is
``blake2_256("evm:" ++ h160)`` (``pallet_evm::HashedAddressMapping<BlakeTwo256>``), which is where
TAO sent from a native wallet lands on the EVM side. Nothing maps a hotkey to an H160 it could sign
with, so a hotkey *associates* an EVM key on a subnet (extrinsic ``associate_evm_key``, signed by
the hotkey and proven by the EVM key); contracts read the association through the UID-lookup
precompile. The address math is the SDK's (``bittensor.evm``); this module adds the
bytes32 form the contract takes. A deposit is one per miner hotkey: there is no machine identity
of the miner's choosing (self-reported GPU UUIDs) for it to split across validators.

What it deliberately does not do: hold keys (``compute.collateral.keys``) or touch a chain.
"""

from __future__ import annotations

from bittensor.evm import h160_to_ss58, normalize_h160, ss58_to_pubkey

from compute.collateral.errors import EvmKeyError

__all__ = ["h160_to_ss58", "hotkey_bytes32", "checked_h160"]


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
