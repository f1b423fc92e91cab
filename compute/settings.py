"""Typed settings for the neurons: bittensor-style dotted flags over environment over ``.env``.

Precedence for every value: command-line flag > process environment > ``.env`` file > default.
Each flag ``--a.b_c`` may also come from the variable ``COMPUTE_A_B_C``; the SDK's usual
variables (``BT_WALLET``, ``BT_WALLET_HOTKEY``, ``BT_WALLET_PATH``, ``BT_NETWORK``,
``BT_CHAIN_ENDPOINT``) are honoured for the wallet and network, and ``WANDB_API_KEY`` is read
as a secret. ``.env`` files are parsed by python-dotenv (quotes, ``export``, ``#`` comments; no
interpolation), with malformed lines reported instead of skipped. Each setting is declared once,
as a field (``compute.flags``): its type, default, flag, help and variables.

What it deliberately does not do: read a config file format of its own, touch the chain or
wallet files, or modify ``os.environ``.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import SecretStr, field_validator

from compute.argv import Parser
from compute.flags import Layered, SettingsError, add_flags, environment, flag, load_dotenv

MAINNET_NETUID = 27


_PRIVATE = tuple(
    ipaddress.IPv4Network(c) for c in ("10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16")
)


def overlay_cidrs(text: str | Sequence[str]) -> tuple[str, ...]:
    """Private IPv4 ranges (``"10.1.0.0/24,192.168.7.0/24"``) in canonical form; ValueError naming
    the first that is not an IPv4 network or reaches beyond the private and CGNAT ranges (the public
    internet needs no exception; loopback, link-local and metadata never get one)."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    found = []
    for item in items:
        try:
            network = ipaddress.ip_network(item, strict=False)
        except ValueError as exc:
            raise ValueError(f"overlay range {item!r} is not an IPv4 network ({exc})") from None
        if not isinstance(network, ipaddress.IPv4Network) or not any(network.subnet_of(a) for a in _PRIVATE):
            raise ValueError(
                f"overlay range {item!r} must lie in 10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12 or "
                "192.168.0.0/16 (public peers need no exception)"
            )
        found.append(str(network))
    return tuple(dict.fromkeys(found))


def _csv(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        items = [str(v) for part in value for v in str(part).split(",")]
    else:
        items = str(value).split(",")
    return tuple(item.strip() for item in items if item.strip())


# ---------------------------------------------------------------- common settings


class CommonSettings(Layered):
    """Settings every neuron shares: subnet, chain, wallet, logging."""

    netuid: int = flag(
        "netuid",
        MAINNET_NETUID,
        f"subnet uid (default {MAINNET_NETUID}; env COMPUTE_NETUID)",
        env=("BT_NETUID",),
        ge=0,
        le=65535,
    )
    network: str = flag(
        "subtensor.network",
        "finney",
        "finney|test|local|ws://...|sim:PATH (default {default}; env BT_NETWORK)",
        env=("BT_NETWORK",),
        min_length=1,
    )
    chain_endpoint: str | None = flag(
        "subtensor.chain_endpoint",
        None,
        "explicit ws(s):// endpoint, overrides the network",
        env=("BT_CHAIN_ENDPOINT",),
    )
    wallet_name: str = flag(
        "wallet.name",
        "default",
        "coldkey wallet name (default 'default'; env BT_WALLET)",
        env=("BT_WALLET",),
        min_length=1,
    )
    wallet_hotkey: str = flag(
        "wallet.hotkey",
        "default",
        "hotkey name (default 'default'; env BT_WALLET_HOTKEY)",
        env=("BT_WALLET_HOTKEY",),
        min_length=1,
    )
    wallet_path: Path = flag(
        "wallet.path",
        Path("~/.bittensor/wallets"),
        "wallets directory (default {default}; env BT_WALLET_PATH)",
        env=("BT_WALLET_PATH",),
    )
    debug: bool = flag("logging.debug", False, "debug logging")
    trace: bool = flag("logging.trace", False, "debug logging incl. libraries")
    logging_dir: Path | None = flag("logging.logging_dir", None, "also write rotating log files here")
    wandb_api_key: SecretStr | None = flag(None, None, env=("WANDB_API_KEY", "COMPUTE_WANDB_API_KEY"))

    @field_validator("wallet_path", "logging_dir")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return None if value is None else Path(os.path.expanduser(str(value)))

    @property
    def chain_target(self) -> str:
        """What ``compute.chain.connect`` takes: the explicit endpoint, else the network name."""
        return self.chain_endpoint or self.network

    @property
    def is_mainnet(self) -> bool:
        return self.network == "finney" and self.chain_endpoint is None and self.netuid == MAINNET_NETUID


def add_common_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the shared flags. Every default is ``None`` so the environment can fill it."""
    group = parser.add_argument_group("common")
    add_flags(group, CommonSettings)
    group.add_argument("--env_file", help="dotenv file with secrets and defaults (default ./.env)")
    return parser


def common_from_args(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> CommonSettings:
    """Build :class:`CommonSettings` from parsed flags; raises :class:`SettingsError`."""
    return CommonSettings.layered(ns, environment(ns, env))


# ---------------------------------------------------------------- miner settings


class MinerSettings(Layered):
    """Everything ``neurons/miner.py`` needs, resolved once."""

    common: CommonSettings
    axon_port: int = flag("axon.port", 8091, "HTTP port of the miner API (default {default})", ge=1, le=65535)
    axon_ip: str = flag("axon.ip", "0.0.0.0", "bind address of the miner API (default {default})")
    external_ip: str | None = flag("axon.external_ip", None, "public ip published on chain")
    external_port: int | None = flag(
        "axon.external_port",
        None,
        "port published on chain, behind NAT (default: --axon.port)",
        ge=1,
        le=65535,
    )
    backend: Literal["docker", "embedded"] = flag(
        "miner.backend", "docker", "rental backend: docker|embedded (default {default})"
    )
    ssh_port_range: tuple[int, int] = flag(
        "miner.ssh_port_range", (40000, 40999), "host ports for lease SSH/extra ports (default 40000-40999)"
    )
    ssh_host: str | None = flag(
        "miner.ssh_host", None, "host name/ip renters use for SSH (default: external ip)"
    )
    base_image: str = flag(
        "miner.base_image",
        "compute-base:cuda",
        "docker image of rental containers (default {default})",
    )
    templates: Path | None = flag(
        "miner.templates", None, "YAML file of lease templates to offer (default: base_image only)"
    )
    # parsed by compute.miner.price
    price: str = flag(
        "miner.price",
        "",
        "asking price in USD, e.g. 'H100=2.50,A100=1.20,base=0.05': per GPU-hour by GPU model, plus "
        "base per lease-hour; renters see it signed and filter by it, validators never read it "
        "(env COMPUTE_MINER_PRICE; default: no price)",
        max_length=4096,
    )
    health_interval: float = flag(
        "miner.health_interval",
        30.0,
        "seconds between lease health checks; 0 = off (default {default})",
        ge=0,
        le=3600,
    )
    lease_lost_after: float = flag(
        "miner.lease_lost_after",
        600.0,
        "seconds a lease may stay down before it is reported lost ({default})",
        ge=0,
        le=86_400,
    )
    max_cpu: int | None = flag("miner.max_cpu", None, "most CPUs one lease may ask for", ge=1, le=1024)
    max_memory_gb: float | None = flag(
        "miner.max_memory_gb", None, "most memory (GB) one lease may ask for", gt=0, le=16384
    )
    max_disk_gb: float | None = flag(
        "miner.max_disk_gb", None, "most disk (GB) one lease may ask for", gt=0, le=1_000_000
    )
    max_lease_days: float = flag(
        "miner.max_lease_days", 30.0, "longest lease, in days (default {default})", gt=0, le=90
    )
    min_stake: float = flag(
        "miner.min_stake", 1000.0, "minimum caller stake in TAO (default {default})", ge=0
    )
    allow_non_validators: bool = flag(
        "miner.allow_non_validators",
        False,
        "accept callers without a validator permit (still subject to min_stake)",
    )
    whitelist_hotkeys: tuple[str, ...] = flag(
        "miner.whitelist_hotkeys", (), "SS58 addresses (space or comma separated)", nargs="*"
    )
    blacklist_hotkeys: tuple[str, ...] = flag(
        "miner.blacklist_hotkeys", (), "SS58 addresses (space or comma separated)", nargs="*"
    )
    whitelist_coldkeys: tuple[str, ...] = flag(
        "miner.whitelist_coldkeys", (), "SS58 addresses (space or comma separated)", nargs="*"
    )
    blacklist_coldkeys: tuple[str, ...] = flag(
        "miner.blacklist_coldkeys", (), "SS58 addresses (space or comma separated)", nargs="*"
    )
    data_dir: Path = flag(
        "miner.data_dir",
        Path("~/.compute/miner"),
        "lease database and backend state (default {default})",
    )
    force_embedded: bool = flag(
        "miner.force_embedded", False, "allow the embedded backend on the mainnet subnet (not recommended)"
    )
    lease_sandbox: Literal["auto", "on", "off"] = flag(
        "miner.lease_sandbox",
        "auto",
        "auto|on|off: run embedded leases' commands as their own uid with the miner's home, "
        "wallets and data hidden (auto: on except on a simulated chain; needs root)",
    )
    gpus: tuple[int, ...] | None = flag(
        "miner.gpus", None, "comma-separated GPU indices to rent out (default all)"
    )
    no_tenant_isolation: bool = flag(
        "miner.no_tenant_isolation",
        False,
        "run Docker leases without the miner's firewall rules (when iptables is unavailable)",
    )
    overlay_cidrs: tuple[str, ...] = flag(
        "miner.overlay_cidrs",
        (),
        "private IPv4 ranges (comma separated) where cluster members' peers are, e.g. this LAN's "
        "GPU hosts: Docker leases that asked for an overlay may send UDP there (default: none; "
        "public peers need no range)",
        nargs="*",
    )
    volume_max_gb: float = flag(
        "miner.volume_max_gb",
        1000.0,
        "GB of persistent volumes in all; 0 = none ({default})",
        ge=0,
        le=1_000_000,
    )
    volume_max_gb_per_renter: float = flag(
        "miner.volume_max_gb_per_renter",
        200.0,
        "GB of persistent volumes per renter ({default})",
        ge=0,
        le=1_000_000,
    )
    volume_retention_days: float = flag(
        "miner.volume_retention_days",
        7.0,
        "days an unused volume is kept after its last lease ended ({default})",
        ge=0,
        le=365,
    )
    volume_quota: Literal["auto", "hard", "watch"] = flag(
        "miner.volume_quota",
        "auto",
        "auto|hard|watch: ext4 image per volume (hard, needs root) or measured usage ({default})",
    )
    hosts_file: Path | None = flag(
        "miner.hosts_file",
        None,
        "YAML file of Docker hosts (local or remote engines) to rent out (default: this machine only)",
    )
    disk_cap_advisory: bool = flag(
        "miner.disk_cap_advisory",
        False,
        "accept Docker leases whose disk size this host cannot hold (no storage quota, no "
        "loop-mounted lease disks: not root, a remote engine); the disk watch stops one over its size "
        "(default: such leases are refused)",
    )
    disk_check_interval: float = flag(
        "miner.disk_check_interval",
        30.0,
        "seconds between measurements of Docker leases' own disk where its size is advisory "
        "(--miner.disk_cap_advisory); a lease over it is stopped (30; 0 = off)",
        ge=0,
        le=3600,
    )
    host_check_interval: float = flag(
        "miner.host_check_interval",
        30.0,
        "seconds between checks of the hosts file's hosts; a host back up is reconciled ({default})",
        ge=1,
        le=3600,
    )
    cpu_share: float = flag(
        "miner.cpu_share",
        1.0,
        "embedded backend: leases answer as a machine this share as fast (demo; default 1)",
        gt=0,
        le=1,
    )
    pace_gflops: float = flag(
        "miner.pace_gflops",
        0.0,
        "embedded backend: GEMM answers take at least their work at cpu_share x this many GFLOPS, "
        "a fixed reference instead of the shared CPU's pace (demo; default 0 = off)",
        ge=0,
        le=1e6,
    )
    # with a reclaim of this miner's deposit pending, rentals ending past it are refused
    # (compute.miner.cover); both unset: no collateral read
    collateral_rpc: str | None = flag(
        "collateral.rpc",
        None,
        "EVM JSON-RPC URL of the collateral contract: while a reclaim of this miner's deposit is "
        "pending, rentals ending past it are refused (env COMPUTE_COLLATERAL_RPC)",
        max_length=512,
    )
    collateral_address: str | None = flag(
        "collateral.address", None, "the Collateral contract (env COMPUTE_COLLATERAL_ADDRESS)", max_length=42
    )

    @field_validator("ssh_port_range", mode="before")
    @classmethod
    def _port_range(cls, value: object) -> object:
        if isinstance(value, str):
            low, sep, high = value.partition("-")
            if not sep or not low.strip().isdigit() or not high.strip().isdigit():
                raise ValueError(f"expected LOW-HIGH such as 40000-40999, got {value!r}")
            value = (int(low), int(high))
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise ValueError(f"expected LOW-HIGH or a (low, high) pair, got {value!r}")
        low, high = value
        if not isinstance(low, (int, float)) or not isinstance(high, (int, float)):
            raise ValueError(f"expected integer ports, got {value!r}")
        if not (1024 <= low <= high <= 65535):
            raise ValueError(f"range {low}-{high} must satisfy 1024 <= LOW <= HIGH <= 65535")
        return value

    @field_validator(
        "whitelist_hotkeys", "blacklist_hotkeys", "whitelist_coldkeys", "blacklist_coldkeys", mode="before"
    )
    @classmethod
    def _keys(cls, value: object) -> tuple[str, ...]:
        return _csv(value)

    @field_validator("overlay_cidrs", mode="before")
    @classmethod
    def _overlay_cidrs(cls, value: object) -> tuple[str, ...]:
        return overlay_cidrs(_csv(value))

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return tuple(int(g) for g in _csv(value))
            except ValueError:
                raise ValueError(f"expected comma-separated integers, got {value!r}") from None
        return value

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return Path(os.path.expanduser(str(value)))

    @property
    def max_lease_s(self) -> int:
        return int(self.max_lease_days * 86400)

    @property
    def public_port(self) -> int:
        """The port published on chain: --axon.external_port (NAT port forward), else --axon.port."""
        return self.external_port or self.axon_port

    @property
    def public_ip(self) -> str:
        """The ip published on chain: --axon.external_ip, else 127.0.0.1 on a simulated chain."""
        if self.external_ip:
            return self.external_ip
        if self.common.chain_target.startswith("sim:") or self.axon_ip not in ("0.0.0.0", "::"):
            return "127.0.0.1" if self.axon_ip in ("0.0.0.0", "::") else self.axon_ip
        raise SettingsError("--axon.external_ip is required on a public network (the ip validators reach)")


def add_miner_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_flags(parser.add_argument_group("miner"), MinerSettings, prefixes=("axon.", "miner."))
    add_flags(parser.add_argument_group("collateral"), MinerSettings, prefixes=("collateral.",))
    return parser


def miner_from_args(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> MinerSettings:
    merged = environment(ns, env)
    return MinerSettings.layered(ns, merged, common=common_from_args(ns, merged))


def parse_miner(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> MinerSettings:
    """Parse the miner's command line (a bad flag: one line on stderr, exit 2)."""
    parser = Parser(prog="neurons/miner.py", description="Compute subnet miner")
    add_miner_args(add_common_args(parser))
    return miner_from_args(parser.parse_args(argv), env)


__all__ = [
    "MAINNET_NETUID",
    "CommonSettings",
    "MinerSettings",
    "SettingsError",
    "add_common_args",
    "add_miner_args",
    "common_from_args",
    "environment",
    "load_dotenv",
    "miner_from_args",
    "overlay_cidrs",
    "parse_miner",
]
