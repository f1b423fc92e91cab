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

from pydantic import SecretStr, field_validator, model_validator

from compute.flags import Layered, add_flags, environment, flag

_H160 = re.compile(r"^0x[0-9a-fA-F]{40}$")
_URL = re.compile(r"^https?://[^\s/]+(/[^\s]*)?$")


class CollateralSettings(Layered):
    rpc: str = flag(
        "collateral.rpc",
        "",
        "EVM JSON-RPC URL of the collateral contract's chain; unset = collateral off",
        max_length=512,
    )
    address: str = flag("collateral.address", "", "the Collateral contract's address (0x...)", max_length=42)
    evm_key: str = flag(
        "collateral.evm_key",
        "default",
        "keystore name under <wallet>/evmkeys signing attestations (COLLATERAL_EVM_KEY wins; default 'default')",
        min_length=1,
        max_length=64,
    )
    floor: float = flag(
        "collateral.floor", 0.5, "credit factor of a machine with no deposit (default {default})", ge=0, le=1
    )
    port: int = flag(
        "collateral.port",
        0,
        "serve evidence, probes and lease reports on this port; 0 = off ({default})",
        ge=0,
        le=65535,
    )
    host: str = flag(
        "collateral.host",
        "127.0.0.1",
        "bind address of the evidence surface (default {default})",
        min_length=1,
        max_length=255,
    )
    peers: tuple[str, ...] = flag(
        "collateral.peers", (), "comma-separated URLs of other validators' evidence surfaces", max_length=64
    )
    dead_seconds: float = flag(
        "collateral.dead_seconds",
        600.0,
        "a reported lease found dead this long inside its term is a failed rental (default {default})",
        gt=0,
        le=86_400,
    )
    probe_seconds: float = flag(
        "collateral.probe_seconds",
        60.0,
        "seconds between probes of a reported lease ({default})",
        gt=0,
        le=3600,
    )
    sync_seconds: float = flag(
        "collateral.sync_seconds",
        30.0,
        "seconds between fetches from peers (default {default})",
        gt=0,
        le=3600,
    )
    cheat_window: float = flag(
        "collateral.cheat_window",
        86_400.0,
        "attest cheat evidence only if this validator's own round proved the cheat within this many s "
        "of seeing it (default 86400); the contract's proposal expiry must cover it plus an hour",
        gt=0,
        le=30 * 86_400,
    )
    max_term: float = flag(
        "collateral.max_term",
        30 * 86_400.0,
        "the longest lease term in s collateral must cover: the validator refuses to run when the "
        "contract's reclaim delay is shorter than it + dead_seconds + an hour (default 2592000, 30 days)",
        gt=0,
        le=90 * 86_400,
    )
    rpc_timeout: float = flag(
        "collateral.rpc_timeout",
        10.0,
        "seconds one JSON-RPC call to the EVM may take in all, retries included (default {default}); the "
        "weights read every deposit within three times that, else fall back (docs/collateral.md)",
        gt=0,
        le=120,
    )
    # never flags: the EVM key itself, and the password unlocking the keystore unattended
    evm_key_hex: SecretStr | None = flag(None, None, env=("COLLATERAL_EVM_KEY",))
    wallet_password: SecretStr | None = flag(None, None, env=("BT_WALLET_PASSWORD",))

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


def add_collateral_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_flags(parser.add_argument_group("collateral"), CollateralSettings)
    return parser


def collateral_from_args(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> CollateralSettings:
    """Flag over ``COMPUTE_COLLATERAL_X`` in ``env`` (default: environment over ``.env``).

    Raises ``SettingsError`` naming the bad flag.
    """
    return CollateralSettings.layered(ns, environment(ns, env))


__all__ = ["CollateralSettings", "add_collateral_args", "collateral_from_args"]
