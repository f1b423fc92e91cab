"""``associate_evm_key`` on the simulated chain: an EVM key linked to a neuron, as subtensor records it.

The runtime's rules, played here: the hotkey signs the extrinsic and must be registered on the
subnet (``HotKeyNotRegisteredInSubNet``); the EVM key proves itself with an EIP-191 personal-sign
signature over ``hotkey_pubkey (32 bytes) ++ keccak_256(u64 LE block_number)``, which must recover
to the named address (``InvalidRecoveredPublicKey``); a neuron re-associates at most once per
``EVM_ASSOCIATE_RATE_LIMIT`` blocks (``EvmKeyAssociateRateLimitExceeded``). The record is
``AssociatedEvmAddress(netuid, uid) -> (h160, block)``, what the UID-lookup precompile reads.

Deliberately not simulated: the EVM itself (``compute.collateral.devchain`` runs one; its
precompile doubles are filled from these records by the local demo's keeper).
"""

from __future__ import annotations

import sqlite3

from bittensor.evm import ss58_to_pubkey
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_utils import keccak

from .records import SimDispatchError, uid_or_raise

EVM_ASSOCIATE_RATE_LIMIT = 7200  # blocks (subtensor's EvmKeyAssociateRateLimit, ~1 day)

_TABLE = """
CREATE TABLE IF NOT EXISTS evm_keys (
    netuid INTEGER NOT NULL,
    uid INTEGER NOT NULL,
    evm_key TEXT NOT NULL,
    block INTEGER NOT NULL,
    PRIMARY KEY (netuid, uid)
);
"""


def ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute(_TABLE)


def proof_message(hotkey: str, block_number: int) -> bytes:
    """The bytes the EVM key signs (EIP-191): hotkey public key ++ keccak(u64 LE block)."""
    return bytes.fromhex(ss58_to_pubkey(hotkey)[2:]) + keccak(int(block_number).to_bytes(8, "little"))


def associate(
    conn: sqlite3.Connection,
    netuid: int,
    hotkey: str,
    evm_key: str,
    block_number: int,
    signature: bytes,
    now_block: int,
) -> int:
    """Record ``evm_key`` for the neuron of ``hotkey``; its uid. Raises SimDispatchError like the runtime."""
    ensure_table(conn)
    uid = uid_or_raise(conn, netuid, hotkey)
    try:
        recovered = Account.recover_message(
            encode_defunct(primitive=proof_message(hotkey, block_number)), signature=signature
        )
    except Exception as error:  # noqa: BLE001 - every malformed signature is the same refusal
        raise SimDispatchError("UnableToRecoverPublicKey", f"EVM key signature unreadable: {error}") from None
    if recovered.lower() != evm_key.lower():
        raise SimDispatchError(
            "InvalidRecoveredPublicKey", f"the proof is signed by {recovered}, not by {evm_key}"
        )
    row = conn.execute("SELECT block FROM evm_keys WHERE netuid = ? AND uid = ?", (netuid, uid)).fetchone()
    if row is not None and now_block - int(row[0]) < EVM_ASSOCIATE_RATE_LIMIT:
        raise SimDispatchError(
            "EvmKeyAssociateRateLimitExceeded",
            f"uid {uid} associated an EVM key at block {row[0]}; again after {EVM_ASSOCIATE_RATE_LIMIT} blocks",
        )
    conn.execute(
        "INSERT OR REPLACE INTO evm_keys (netuid, uid, evm_key, block) VALUES (?, ?, ?, ?)",
        (netuid, uid, evm_key.lower(), now_block),
    )
    return uid


def evm_keys(conn: sqlite3.Connection, netuid: int) -> dict[int, tuple[str, int]]:
    """uid -> (EVM address, block associated) for every neuron of ``netuid`` that associated one."""
    ensure_table(conn)
    rows = conn.execute("SELECT uid, evm_key, block FROM evm_keys WHERE netuid = ?", (netuid,)).fetchall()
    return {int(uid): (str(key), int(block)) for uid, key, block in rows}
