"""The EVM key a miner, validator or renter signs collateral transactions with.

Resolution, first found wins:
1. ``COLLATERAL_EVM_KEY`` (hex private key) in the process environment or the ``.env`` file
   (``--env_file``): for unattended validators; never commit it (``.env`` is git-ignored).
2. The SDK's encrypted keystore next to the wallet's hotkeys,
   ``<wallet.path>/<wallet.name>/evmkeys/<collateral.evm_key>`` (keystore V3, made by
   ``btcli evm`` or ``bittensor.evm.create_evm_key``), unlocked with ``BT_WALLET_PASSWORD`` or a
   prompt. Recommended for miners and renters: the key is never stored in plain text.

The key's address must be associated with the hotkey on the subnet (``associate_evm_key``) for a
deposit or an attestation to be accepted; the address's ss58 mirror is where TAO is sent to fund it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from compute.collateral.errors import EvmKeyError

ENV_KEY = "COLLATERAL_EVM_KEY"


def account_from_hex(text: str) -> LocalAccount:
    value = text.strip().removeprefix("0x")
    if len(value) != 64:
        raise EvmKeyError(f"{ENV_KEY} must be 32 bytes of hex (64 characters), got {len(value)}")
    try:
        return Account.from_key(bytes.fromhex(value))
    except ValueError as error:
        raise EvmKeyError(f"{ENV_KEY} is not a valid private key: {error}") from None


def load_account(
    env: Mapping[str, str], wallet_name: str, wallet_path: Path, key_name: str = "default"
) -> LocalAccount:
    """The signing account (see the module docstring); EvmKeyError with what to do when none."""
    if env.get(ENV_KEY):
        return account_from_hex(env[ENV_KEY])
    from bittensor.evm import unlock_evm_key

    keyfile = Path(os.path.expanduser(str(wallet_path))) / wallet_name / "evmkeys" / key_name
    if not keyfile.is_file():
        raise EvmKeyError(
            f"no EVM key: set {ENV_KEY} (hex) in the environment or .env, or create the keystore "
            f"{keyfile} (bittensor.evm.create_evm_key(name={key_name!r}, wallet_name={wallet_name!r}))"
        )
    try:
        return unlock_evm_key(key_name, wallet_name, str(wallet_path), password=env.get("BT_WALLET_PASSWORD"))
    except ValueError as error:
        raise EvmKeyError(str(error)) from None
