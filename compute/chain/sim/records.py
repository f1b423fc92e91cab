"""Records, schema and errors of the simulated chain (no I/O).

The SQLite schema, the frozen row values :class:`SimChainState` returns, the
error types, and the runtime's weight rules as pure checks. Kept apart from
``state.py`` so the rules read on their own.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

SCHEMA_VERSION = 1
RAO_PER_TAO = 1_000_000_000
U16_MAX = 65_535

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS subnets (
    netuid INTEGER PRIMARY KEY,
    tempo INTEGER NOT NULL,
    weights_rate_limit INTEGER NOT NULL,
    commit_reveal INTEGER NOT NULL DEFAULT 0,
    max_weights_limit INTEGER NOT NULL,
    min_allowed_weights INTEGER NOT NULL,
    weights_version_key INTEGER NOT NULL DEFAULT 0,
    max_uids INTEGER NOT NULL,
    registered_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS neurons (
    netuid INTEGER NOT NULL,
    uid INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    coldkey TEXT NOT NULL,
    stake_rao INTEGER NOT NULL,
    validator_permit INTEGER NOT NULL,
    axon_ip INTEGER NOT NULL DEFAULT 0,
    axon_port INTEGER NOT NULL DEFAULT 0,
    axon_ip_type INTEGER NOT NULL DEFAULT 4,
    axon_protocol INTEGER NOT NULL DEFAULT 0,
    axon_version INTEGER NOT NULL DEFAULT 0,
    axon_block INTEGER NOT NULL DEFAULT 0,
    last_update INTEGER NOT NULL DEFAULT 0,
    registered_at INTEGER NOT NULL,
    PRIMARY KEY (netuid, uid),
    UNIQUE (netuid, hotkey)
);
CREATE TABLE IF NOT EXISTS weights (
    netuid INTEGER NOT NULL,
    uid INTEGER NOT NULL,
    dest INTEGER NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (netuid, uid, dest)
);
"""


class SimChainError(Exception):
    """Root of the simulated chain's errors (bad file, unknown subnet, bad input)."""


class SimDispatchError(SimChainError):
    """An extrinsic the real runtime would reject; ``name`` is the runtime error name."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name
        self.message = message


@dataclass(frozen=True)
class SubnetRow:
    netuid: int
    tempo: int
    weights_rate_limit: int
    commit_reveal: bool
    max_weights_limit: int
    min_allowed_weights: int
    weights_version_key: int
    max_uids: int
    registered_at: int


@dataclass(frozen=True)
class NeuronRow:
    netuid: int
    uid: int
    hotkey: str
    coldkey: str
    stake_rao: int
    validator_permit: bool
    axon_ip: int
    axon_port: int
    axon_ip_type: int
    axon_protocol: int
    axon_version: int
    last_update: int
    registered_at: int


@dataclass(frozen=True)
class AxonUpdate:
    ip: int
    port: int
    ip_type: int
    protocol: int
    version: int


def subnet_row(row: tuple) -> SubnetRow:
    return SubnetRow(row[0], row[1], row[2], bool(row[3]), *row[4:])


def uid_or_raise(conn: sqlite3.Connection, netuid: int, hotkey: str) -> int:
    row = conn.execute("SELECT uid FROM neurons WHERE netuid = ? AND hotkey = ?", (netuid, hotkey)).fetchone()
    if row is None:
        raise SimDispatchError(
            "HotKeyNotRegisteredInSubNet", f"hotkey {hotkey} is not registered on netuid {netuid}"
        )
    return int(row[0])


def check_weights(
    conn: sqlite3.Connection,
    netuid: int,
    subnet: SubnetRow,
    dests: list[int],
    values: list[int],
    self_weight: bool,
) -> None:
    count = conn.execute("SELECT COUNT(*) FROM neurons WHERE netuid = ?", (netuid,)).fetchone()[0]
    if len(set(dests)) != len(dests):
        raise SimDispatchError("DuplicateUids", "weights name a uid more than once")
    if any(d < 0 or d >= count for d in dests):
        raise SimDispatchError("UidVecContainInvalidOne", f"weights name a uid outside 0..{count - 1}")
    if any(v < 0 or v > U16_MAX for v in values):
        raise SimDispatchError("InvalidWeight", "weight values must be u16")
    if self_weight:
        return
    if len(dests) < min(subnet.min_allowed_weights, count):
        raise SimDispatchError(
            "WeightVecLengthIsLow",
            f"{len(dests)} weights; subnet {netuid} needs {subnet.min_allowed_weights}",
        )
    total = sum(values)
    # The SDK clips to the limit before u16 rounding; allow that rounding slack.
    if total and len(values) > 1 and max(values) / total > subnet.max_weights_limit / U16_MAX + 1e-3:
        raise SimDispatchError(
            "MaxWeightExceeded", f"a weight exceeds MaxWeightsLimit {subnet.max_weights_limit}"
        )


def check_range(name: str, value: int, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SimChainError(f"{name} must be an integer in {low}..{high}, got {value!r}")
