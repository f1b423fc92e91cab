"""The validator's ``--collateral.*`` flags over environment over ``.env`` (pure: opens nothing).

Off unless ``--collateral.rpc`` is set: then there is no collateral factor at all, no probe, no
evidence surface and no attestation. With it, the validator reads deposits into credit; with an
EVM key (``COLLATERAL_EVM_KEY`` or the keystore ``--collateral.evm_key``) it also attests; with
``--collateral.port`` it serves its evidence to renters and other validators (``--collateral.peers``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from compute.settings import SettingsError

_H160 = re.compile(r"^0x[0-9a-fA-F]{40}$")
_URL = re.compile(r"^https?://[^\s/]+(/[^\s]*)?$")


class CollateralSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rpc: str = Field("", max_length=512)  # EVM JSON-RPC URL; empty: collateral off
    address: str = Field("", max_length=42)  # the Collateral contract
    evm_key: str = Field("default", min_length=1, max_length=64)  # keystore name under <wallet>/evmkeys
    floor: float = Field(0.5, ge=0, le=1)  # credit factor with no deposit
    port: int = Field(0, ge=0, le=65535)  # the evidence surface; 0: not served
    host: str = Field("127.0.0.1", min_length=1, max_length=255)
    peers: tuple[str, ...] = Field((), max_length=64)  # other validators' evidence surfaces
    dead_seconds: float = Field(600.0, gt=0, le=86_400)  # a lease dead this long inside its term failed
    probe_seconds: float = Field(60.0, gt=0, le=3600)  # between probes of a watched lease
    sync_seconds: float = Field(30.0, gt=0, le=3600)  # between fetches from peers
    cheat_window: float = Field(86_400.0, gt=0, le=30 * 86_400)  # own proven cheat this near: attest
    max_term: float = Field(30 * 86_400.0, gt=0, le=90 * 86_400)  # the longest lease collateral covers
    rpc_timeout: float = Field(10.0, gt=0, le=120)  # one JSON-RPC call in all (compute.collateral.rpc)
    evm_key_hex: SecretStr | None = None  # COLLATERAL_EVM_KEY from the environment or .env (never a flag)
    wallet_password: SecretStr | None = None  # BT_WALLET_PASSWORD: unlocks the keystore unattended

    @field_validator("peers", mode="before")
    @classmethod
    def _peers(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(part.strip().rstrip("/") for part in value.split(",") if part.strip())
        for url in value if isinstance(value, (list, tuple)) else ():
            if not isinstance(url, str) or not _URL.fullmatch(url):
                raise ValueError(f"{url!r} is not an http(s) URL")
        return value

    @model_validator(mode="after")
    def _contract(self) -> CollateralSettings:
        if self.rpc and not _H160.fullmatch(self.address):
            raise ValueError(
                "--collateral.address must be the contract's 0x address when --collateral.rpc is set"
            )
        if self.rpc and not _URL.fullmatch(self.rpc):
            raise ValueError(f"--collateral.rpc {self.rpc!r} is not an http(s) URL")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.rpc)


# flag -> (field, type, help)
FLAGS: dict[str, tuple[str, type, str]] = {
    "collateral.rpc": (
        "rpc",
        str,
        "EVM JSON-RPC URL of the collateral contract's chain; unset = collateral off",
    ),
    "collateral.address": ("address", str, "the Collateral contract's address (0x...)"),
    "collateral.evm_key": (
        "evm_key",
        str,
        "keystore name under <wallet>/evmkeys signing attestations (COLLATERAL_EVM_KEY wins; default 'default')",
    ),
    "collateral.floor": ("floor", float, "credit factor of a machine with no deposit (default 0.5)"),
    "collateral.port": ("port", int, "serve evidence, probes and lease reports on this port; 0 = off (0)"),
    "collateral.host": ("host", str, "bind address of the evidence surface (default 127.0.0.1)"),
    "collateral.peers": ("peers", str, "comma-separated URLs of other validators' evidence surfaces"),
    "collateral.dead_seconds": (
        "dead_seconds",
        float,
        "a reported lease found dead this long inside its term is a failed rental (default 600)",
    ),
    "collateral.probe_seconds": ("probe_seconds", float, "seconds between probes of a reported lease (60)"),
    "collateral.sync_seconds": ("sync_seconds", float, "seconds between fetches from peers (default 30)"),
    "collateral.cheat_window": (
        "cheat_window",
        float,
        "attest cheat evidence only if this validator's own round proved the cheat within this many s "
        "of seeing it (default 86400); the contract's proposal expiry must cover it plus an hour",
    ),
    "collateral.max_term": (
        "max_term",
        float,
        "the longest lease term in s collateral must cover: the validator refuses to run when the "
        "contract's reclaim delay is shorter than it + dead_seconds + an hour (default 2592000, 30 days)",
    ),
    "collateral.rpc_timeout": (
        "rpc_timeout",
        float,
        "seconds one JSON-RPC call to the EVM may take in all, retries included (default 10); the "
        "weights read every deposit within three times that, else fall back (docs/collateral.md)",
    ),
}


def add_collateral_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group("collateral")
    for flag, (_field, kind, text) in FLAGS.items():
        group.add_argument(f"--{flag}", type=kind, help=text)
    return parser


def collateral_from_args(ns: argparse.Namespace, env: Mapping[str, str]) -> CollateralSettings:
    """Flag over ``COMPUTE_COLLATERAL_X`` in ``env``; SettingsError naming the bad flag."""
    values: dict[str, object] = {}
    for flag, (field, _kind, _text) in FLAGS.items():
        value = getattr(ns, flag, None)
        if value is None:
            value = env.get("COMPUTE_" + flag.replace(".", "_").upper()) or None
        if value is not None:
            values[field] = value
    if env.get("COLLATERAL_EVM_KEY"):
        values["evm_key_hex"] = env["COLLATERAL_EVM_KEY"]
    if env.get("BT_WALLET_PASSWORD"):
        values["wallet_password"] = env["BT_WALLET_PASSWORD"]
    try:
        return CollateralSettings(**values)
    except ValidationError as error:
        names = {field: flag for flag, (field, _k, _t) in FLAGS.items()}
        problems = "; ".join(
            f"--{names.get(str(e['loc'][0]), 'collateral')}: {e['msg']}" if e["loc"] else e["msg"]
            for e in error.errors()
        )
        raise SettingsError(problems) from None


__all__ = ["FLAGS", "CollateralSettings", "add_collateral_args", "collateral_from_args"]
