"""Simulated chain state in one SQLite file, shared by several processes.

A miner, a validator and an operator CLI started as separate processes can all
open the same ``chain.db`` (WAL journal, ``busy_timeout``), so a local demo runs
the real SDK code paths against one consistent state. Blocks advance with the
wall clock: ``block = genesis_block + floor((now - genesis_time) / block_time)``.

The chain rules enforced here are the ones neurons of this subnet meet on the
real chain when they serve an axon or set weights: registration, the weights
rate limit, the validator permit, the weights version key, valid and unique
destination uids, and ``MaxWeightsLimit``/``MinAllowedWeights`` bounds. Each
failure raises :class:`SimDispatchError` carrying the real runtime error name
(``SettingWeightsTooFast``, ``HotKeyNotRegisteredInSubNet``...), so the SDK maps
it to the same ``ErrorCode`` a live chain would produce.

Deliberately not simulated: emissions, Yuma consensus, bonds, balances and
fees, deregistration, commit-reveal (the flag exists and is reported, but a
subnet with it enabled refuses plaintext weights like the real chain does), and
history (reads at an old block hash return the current state).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from compute.sqlitedb import immediate, open_db

from .evm import associate as associate_evm
from .evm import evm_keys as read_evm_keys
from .records import (
    RAO_PER_TAO,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    U16_MAX,
    AxonUpdate,
    NeuronRow,
    SimChainError,
    SimDispatchError,
    SubnetRow,
    check_range,
    check_weights,
    subnet_row,
    uid_or_raise,
)

__all__ = [
    "RAO_PER_TAO",
    "AxonUpdate",
    "NeuronRow",
    "SimChainError",
    "SimChainState",
    "SimDispatchError",
    "SubnetRow",
]


class SimChainState:
    """Handle on one simulated chain file. Cheap to open; safe to use from several threads."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time):
        self.path = Path(path)
        self._clock = clock
        if not self.path.is_file():
            raise SimChainError(
                f"no simulated chain at {self.path} (create it with `python -m compute chain create`)"
            )
        try:
            with self._connect() as conn:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as error:
            raise SimChainError(f"{self.path} is not a simulated chain: {error}") from error
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise SimChainError(f"{self.path} is not a simulated chain of schema version {SCHEMA_VERSION}")
        self.block_time = float(meta["block_time"])
        self.genesis_block = int(meta["genesis_block"])
        self.genesis_time = float(meta["genesis_time"])
        self.default_netuid = int(meta["default_netuid"])

    # Lifecycle ------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | Path,
        netuid: int = 27,
        block_time: float = 1.0,
        tempo: int = 360,
        weights_rate_limit: int = 100,
        *,
        max_weights_limit: int = U16_MAX,
        min_allowed_weights: int = 1,
        commit_reveal: bool = False,
        genesis_block: int = 1,
        overwrite: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> SimChainState:
        """Create a chain file with one subnet. Refuses to replace a file unless ``overwrite``."""
        path = Path(path)
        if block_time <= 0 or not math.isfinite(block_time):
            raise SimChainError(f"block_time must be a positive number of seconds, got {block_time}")
        if path.exists():
            if not overwrite:
                raise SimChainError(f"{path} already exists (pass overwrite=True / --force to replace it)")
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = _open_sqlite(path)
        try:
            with conn:
                conn.executescript(SCHEMA_SQL)
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("schema_version", str(SCHEMA_VERSION)),
                        ("block_time", repr(float(block_time))),
                        ("genesis_block", str(int(genesis_block))),
                        ("genesis_time", repr(clock())),
                        ("default_netuid", str(int(netuid))),
                    ],
                )
        finally:
            conn.close()
        state = cls(path, clock=clock)
        state.add_subnet(
            netuid,
            tempo=tempo,
            weights_rate_limit=weights_rate_limit,
            max_weights_limit=max_weights_limit,
            min_allowed_weights=min_allowed_weights,
            commit_reveal=commit_reveal,
        )
        return state

    @classmethod
    def open(cls, path: str | Path, clock: Callable[[], float] = time.time) -> SimChainState:
        return cls(Path(path), clock=clock)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = _open_sqlite(self.path)
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: concurrent writers in other processes queue on busy_timeout."""
        with self._connect() as conn, immediate(conn):
            yield conn

    # Clock ----------------------------------------------------------------------

    def block(self) -> int:
        elapsed = max(0.0, self._clock() - self.genesis_time)
        return self.genesis_block + int(elapsed // self.block_time)

    # Subnets --------------------------------------------------------------------

    def add_subnet(
        self,
        netuid: int,
        *,
        tempo: int = 360,
        weights_rate_limit: int = 100,
        max_weights_limit: int = U16_MAX,
        min_allowed_weights: int = 1,
        commit_reveal: bool = False,
        weights_version_key: int = 0,
        max_uids: int = 256,
    ) -> None:
        check_range("netuid", netuid, 0, U16_MAX)
        check_range("tempo", tempo, 1, U16_MAX)
        check_range("weights_rate_limit", weights_rate_limit, 0, 2**63 - 1)
        check_range("max_weights_limit", max_weights_limit, 1, U16_MAX)
        check_range("min_allowed_weights", min_allowed_weights, 0, U16_MAX)
        check_range("max_uids", max_uids, 1, U16_MAX)
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM subnets WHERE netuid = ?", (netuid,)).fetchone():
                raise SimChainError(f"subnet {netuid} already exists")
            conn.execute(
                "INSERT INTO subnets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    netuid,
                    tempo,
                    weights_rate_limit,
                    int(commit_reveal),
                    max_weights_limit,
                    min_allowed_weights,
                    weights_version_key,
                    max_uids,
                    self.block(),
                ),
            )

    def set_hyperparameter(self, netuid: int, name: str, value: int) -> None:
        """Owner/sudo knob for tests and demos: ``weights_rate_limit``, ``commit_reveal``, ..."""
        allowed = {
            "tempo",
            "weights_rate_limit",
            "commit_reveal",
            "max_weights_limit",
            "min_allowed_weights",
            "weights_version_key",
            "max_uids",
        }
        if name not in allowed:
            raise SimChainError(f"unknown hyperparameter {name!r}; known: {sorted(allowed)}")
        with self._write() as conn:
            self._subnet(conn, netuid)
            conn.execute(f"UPDATE subnets SET {name} = ? WHERE netuid = ?", (int(value), netuid))

    def netuids(self) -> list[int]:
        with self._connect() as conn:
            return [row[0] for row in conn.execute("SELECT netuid FROM subnets ORDER BY netuid")]

    def subnet(self, netuid: int) -> SubnetRow | None:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM subnets WHERE netuid = ?", (netuid,)).fetchone()
        return subnet_row(row) if row else None

    def _subnet(self, conn: sqlite3.Connection, netuid: int) -> SubnetRow:
        row = conn.execute("SELECT * FROM subnets WHERE netuid = ?", (netuid,)).fetchone()
        if row is None:
            raise SimDispatchError(
                "SubnetNotExists", f"subnet {netuid} does not exist on this simulated chain"
            )
        return subnet_row(row)

    # Neurons --------------------------------------------------------------------

    def register(
        self,
        hotkey: str,
        coldkey: str,
        stake_tao: float = 0.0,
        validator_permit: bool = False,
        *,
        netuid: int | None = None,
    ) -> int:
        """Register (or re-register) ``hotkey``; returns its uid. Idempotent per hotkey.

        Registering a known hotkey again keeps its uid and updates stake and permit;
        a different coldkey for a known hotkey is refused (the real chain binds them).
        """
        netuid = self.default_netuid if netuid is None else netuid
        if not hotkey or not coldkey:
            raise SimChainError("hotkey and coldkey are required")
        if stake_tao < 0 or not math.isfinite(stake_tao):
            raise SimChainError(f"stake must be a non-negative number of TAO, got {stake_tao}")
        stake_rao = int(round(stake_tao * RAO_PER_TAO))
        with self._write() as conn:
            subnet = self._subnet(conn, netuid)
            row = conn.execute(
                "SELECT uid, coldkey FROM neurons WHERE netuid = ? AND hotkey = ?", (netuid, hotkey)
            ).fetchone()
            if row is not None:
                if row[1] != coldkey:
                    raise SimChainError(f"hotkey {hotkey} is already owned by coldkey {row[1]}")
                conn.execute(
                    "UPDATE neurons SET stake_rao = ?, validator_permit = ? WHERE netuid = ? AND uid = ?",
                    (stake_rao, int(validator_permit), netuid, row[0]),
                )
                return int(row[0])
            count = conn.execute("SELECT COUNT(*) FROM neurons WHERE netuid = ?", (netuid,)).fetchone()[0]
            if count >= subnet.max_uids:
                raise SimDispatchError(
                    "TooManyRegistrationsThisBlock", f"subnet {netuid} is full ({count} uids)"
                )
            conn.execute(
                "INSERT INTO neurons (netuid, uid, hotkey, coldkey, stake_rao, validator_permit, registered_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (netuid, count, hotkey, coldkey, stake_rao, int(validator_permit), self.block()),
            )
            return int(count)

    def neurons(self, netuid: int) -> list[NeuronRow]:
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT netuid, uid, hotkey, coldkey, stake_rao, validator_permit, axon_ip, axon_port,"
                " axon_ip_type, axon_protocol, axon_version, last_update, registered_at"
                " FROM neurons WHERE netuid = ? ORDER BY uid",
                (netuid,),
            ).fetchall()
        return [NeuronRow(row[0], row[1], row[2], row[3], row[4], bool(row[5]), *row[6:]) for row in rows]

    def uid_of(self, netuid: int, hotkey: str) -> int | None:
        with self._connect() as conn:
            row = conn.execute(
                "SELECT uid FROM neurons WHERE netuid = ? AND hotkey = ?", (netuid, hotkey)
            ).fetchone()
        return int(row[0]) if row else None

    def hotkey_netuids(self, hotkey: str) -> list[int]:
        with self._connect() as conn:
            rows = conn.execute("SELECT netuid FROM neurons WHERE hotkey = ? ORDER BY netuid", (hotkey,))
            return [row[0] for row in rows]

    def coldkey_of(self, hotkey: str) -> str | None:
        with self._connect() as conn:
            row = conn.execute("SELECT coldkey FROM neurons WHERE hotkey = ? LIMIT 1", (hotkey,)).fetchone()
        return row[0] if row else None

    # Extrinsics -----------------------------------------------------------------

    def serve_axon(self, netuid: int, hotkey: str, axon: AxonUpdate) -> None:
        check_range("port", axon.port, 0, U16_MAX)
        if axon.ip_type not in (4, 6):
            raise SimDispatchError("InvalidIpType", f"ip_type must be 4 or 6, got {axon.ip_type}")
        if axon.ip < 0 or axon.ip >= (1 << (32 if axon.ip_type == 4 else 128)):
            raise SimDispatchError("InvalidIpAddress", f"ip {axon.ip} does not fit ip_type {axon.ip_type}")
        with self._write() as conn:
            self._subnet(conn, netuid)
            uid = uid_or_raise(conn, netuid, hotkey)
            conn.execute(
                "UPDATE neurons SET axon_ip = ?, axon_port = ?, axon_ip_type = ?, axon_protocol = ?,"
                " axon_version = ?, axon_block = ? WHERE netuid = ? AND uid = ?",
                (axon.ip, axon.port, axon.ip_type, axon.protocol, axon.version, self.block(), netuid, uid),
            )

    def associate_evm_key(
        self, netuid: int, hotkey: str, evm_key: str, block_number: int, signature: bytes
    ) -> int:
        """Apply ``associate_evm_key`` (compute.chain.sim.evm); the neuron's uid."""
        with self._write() as conn:
            self._subnet(conn, netuid)
            return associate_evm(conn, netuid, hotkey, evm_key, block_number, signature, self.block())

    def evm_keys(self, netuid: int) -> dict[int, tuple[str, int]]:
        """uid -> (EVM address, block) of the neurons that associated an EVM key on ``netuid``."""
        with self._write() as conn:
            return read_evm_keys(conn, netuid)

    def set_weights(
        self, netuid: int, hotkey: str, dests: list[int], values: list[int], version_key: int
    ) -> None:
        """Apply a plaintext ``set_mechanism_weights`` with the runtime's checks."""
        if len(dests) != len(values):
            raise SimDispatchError("WeightVecNotEqualSize", "dests and weights differ in length")
        with self._write() as conn:
            subnet = self._subnet(conn, netuid)
            if subnet.commit_reveal:
                raise SimDispatchError(
                    "CommitRevealEnabled", f"subnet {netuid} requires commit-reveal weights"
                )
            uid = uid_or_raise(conn, netuid, hotkey)
            permit, last_update = conn.execute(
                "SELECT validator_permit, last_update FROM neurons WHERE netuid = ? AND uid = ?",
                (netuid, uid),
            ).fetchone()
            self_weight = dests == [uid]
            if not permit and not self_weight:
                raise SimDispatchError(
                    "NeuronNoValidatorPermit", f"uid {uid} has no validator permit on {netuid}"
                )
            if version_key < subnet.weights_version_key:
                raise SimDispatchError(
                    "IncorrectWeightVersionKey",
                    f"version_key {version_key} is older than the required {subnet.weights_version_key}",
                )
            now = self.block()
            if (
                subnet.weights_rate_limit
                and last_update > 0
                and now - last_update < subnet.weights_rate_limit
            ):
                raise SimDispatchError(
                    "SettingWeightsTooFast",
                    f"weights were set {now - last_update} blocks ago; the limit is {subnet.weights_rate_limit}",
                )
            check_weights(conn, netuid, subnet, dests, values, self_weight)
            conn.execute("DELETE FROM weights WHERE netuid = ? AND uid = ?", (netuid, uid))
            conn.executemany(
                "INSERT INTO weights VALUES (?, ?, ?, ?)",
                [(netuid, uid, d, v) for d, v in zip(dests, values, strict=True) if v > 0],
            )
            conn.execute(
                "UPDATE neurons SET last_update = ? WHERE netuid = ? AND uid = ?", (now, netuid, uid)
            )

    def weights(self, netuid: int) -> dict[int, list[tuple[int, int]]]:
        """``{uid: [(dest, u16 value), ...]}`` for every uid that has set weights."""
        out: dict[int, list[tuple[int, int]]] = {}
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT uid, dest, value FROM weights WHERE netuid = ? ORDER BY uid, dest", (netuid,)
            )
            for uid, dest, value in rows:
                out.setdefault(int(uid), []).append((int(dest), int(value)))
        return out


def _open_sqlite(path: Path) -> sqlite3.Connection:
    return open_db(path)
