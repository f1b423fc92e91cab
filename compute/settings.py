"""Typed settings for the neurons: bittensor-style dotted flags over environment over ``.env``.

Precedence for every value: command-line flag > process environment > ``.env`` file > default.
Each flag ``--a.b_c`` may also come from the variable ``COMPUTE_A_B_C``; the SDK's usual
variables (``BT_WALLET``, ``BT_WALLET_HOTKEY``, ``BT_WALLET_PATH``, ``BT_NETWORK``,
``BT_CHAIN_ENDPOINT``) are honoured for the wallet and network, and ``WANDB_API_KEY`` is read
as a secret. ``.env`` files are parsed by python-dotenv (quotes, ``export``, ``#`` comments; no
interpolation), with malformed lines reported instead of skipped.

What it deliberately does not do: read a config file format of its own, touch the chain or
wallet files, or modify ``os.environ``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, TypeVar

from dotenv.parser import parse_stream
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from compute.argv import Parser
from compute.flags import SettingsError

MAINNET_NETUID = 27
_FLAG_ENV_PREFIX = "COMPUTE_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


# ---------------------------------------------------------------- .env and value lookup


def load_dotenv(path: str | Path) -> dict[str, str]:
    """The ``KEY=VALUE`` pairs of ``path`` (missing file -> empty), parsed by python-dotenv.

    Never exports them (the process environment stays as it is) and never interpolates. A line
    python-dotenv cannot parse, or a bare key without ``=``, is a :class:`SettingsError` naming
    the file and line, instead of python-dotenv's default of warning and skipping it.
    """
    file = Path(path)
    if not file.is_file():
        return {}
    values: dict[str, str] = {}
    with file.open(encoding="utf-8") as stream:
        for binding in parse_stream(stream):
            if binding.error or (binding.key is not None and binding.value is None):
                text = binding.original.string
                number = binding.original.line + len(text) - len(text.lstrip("\n"))  # blank lines before
                raise SettingsError(f"{file}:{number}: expected KEY=VALUE, got {text.strip()!r}")
            if binding.key is not None and binding.value is not None:
                values[binding.key] = binding.value
    return values


class _Lookup:
    """Resolves one value from the parsed flags, then the environment, then ``.env``."""

    def __init__(self, ns: argparse.Namespace, env: Mapping[str, str]) -> None:
        self.ns = ns
        self.env = env

    def get(self, flag: str, *env_names: str, default: object = None) -> object:
        value = getattr(self.ns, flag, None)
        if value is not None:
            return value
        for name in (*env_names, _FLAG_ENV_PREFIX + flag.replace(".", "_").upper()):
            if name in self.env and self.env[name] != "":
                return self.env[name]
        return default

    def flag(self, flag: str, *env_names: str) -> bool:
        value = self.get(flag, *env_names, default=False)
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise SettingsError(f"--{flag}: expected true/false, got {value!r}")


def environment(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Process environment over the ``.env`` file named by ``--env_file`` (default ``./.env``)."""
    if env is not None:
        return dict(env)
    merged = load_dotenv(getattr(ns, "env_file", None) or ".env")
    merged.update(os.environ)
    return merged


def _csv(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        items = [str(v) for part in value for v in str(part).split(",")]
    else:
        items = str(value).split(",")
    return tuple(item.strip() for item in items if item.strip())


_M = TypeVar("_M", bound=BaseModel)


def _validated(model: type[_M], values: dict[str, object]) -> _M:
    try:
        return model(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{_FLAG_NAMES.get(str(err['loc'][0]), err['loc'][0])}: {err['msg']}" for err in exc.errors()
        )
        raise SettingsError(problems) from None


# ---------------------------------------------------------------- common settings


class CommonSettings(BaseModel):
    """Settings every neuron shares: subnet, chain, wallet, logging."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    netuid: int = Field(MAINNET_NETUID, ge=0, le=65535)
    network: str = Field("finney", min_length=1)
    chain_endpoint: str | None = None
    wallet_name: str = Field("default", min_length=1)
    wallet_hotkey: str = Field("default", min_length=1)
    wallet_path: Path = Path("~/.bittensor/wallets")
    debug: bool = False
    trace: bool = False
    logging_dir: Path | None = None
    wandb_api_key: SecretStr | None = None

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
    group.add_argument(
        "--netuid", type=int, help=f"subnet uid (default {MAINNET_NETUID}; env COMPUTE_NETUID)"
    )
    group.add_argument(
        "--subtensor.network", help="finney|test|local|ws://...|sim:PATH (default finney; env BT_NETWORK)"
    )
    group.add_argument("--subtensor.chain_endpoint", help="explicit ws(s):// endpoint, overrides the network")
    group.add_argument("--wallet.name", help="coldkey wallet name (default 'default'; env BT_WALLET)")
    group.add_argument("--wallet.hotkey", help="hotkey name (default 'default'; env BT_WALLET_HOTKEY)")
    group.add_argument(
        "--wallet.path", help="wallets directory (default ~/.bittensor/wallets; env BT_WALLET_PATH)"
    )
    group.add_argument("--logging.debug", action="store_true", default=None, help="debug logging")
    group.add_argument(
        "--logging.trace", action="store_true", default=None, help="debug logging incl. libraries"
    )
    group.add_argument("--logging.logging_dir", help="also write rotating log files here")
    group.add_argument("--env_file", help="dotenv file with secrets and defaults (default ./.env)")
    return parser


def common_from_args(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> CommonSettings:
    """Build :class:`CommonSettings` from parsed flags; raises :class:`SettingsError`."""
    look = _Lookup(ns, environment(ns, env))
    values = {
        "netuid": look.get("netuid", "BT_NETUID", default=MAINNET_NETUID),
        "network": look.get("subtensor.network", "BT_NETWORK", default="finney"),
        "chain_endpoint": look.get("subtensor.chain_endpoint", "BT_CHAIN_ENDPOINT"),
        "wallet_name": look.get("wallet.name", "BT_WALLET", default="default"),
        "wallet_hotkey": look.get("wallet.hotkey", "BT_WALLET_HOTKEY", default="default"),
        "wallet_path": look.get("wallet.path", "BT_WALLET_PATH", default="~/.bittensor/wallets"),
        "debug": look.flag("logging.debug"),
        "trace": look.flag("logging.trace"),
        "logging_dir": look.get("logging.logging_dir"),
        "wandb_api_key": look.get("wandb_api_key", "WANDB_API_KEY"),
    }
    return _validated(CommonSettings, values)


# ---------------------------------------------------------------- miner settings


class MinerSettings(BaseModel):
    """Everything ``neurons/miner.py`` needs, resolved once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    common: CommonSettings
    axon_port: int = Field(8091, ge=1, le=65535)
    axon_ip: str = "0.0.0.0"
    external_ip: str | None = None
    external_port: int | None = Field(None, ge=1, le=65535)  # behind NAT: the port validators reach
    backend: Literal["docker", "embedded"] = "docker"
    ssh_port_range: tuple[int, int] = (40000, 40999)
    ssh_host: str | None = None
    base_image: str = "compute-base:cuda"
    templates: Path | None = None  # YAML catalog of lease base images (None: base_image only)
    health_interval: float = Field(30.0, ge=0, le=3600)  # seconds between lease health checks; 0 = off
    # asking price, "H100=2.50,base=0.05" (USD per GPU-hour by model, per lease-hour); "" = none.
    # Parsed by compute.miner.price; shown to renters, never read by validators.
    price: str = Field("", max_length=4096)
    lease_lost_after: float = Field(600.0, ge=0, le=86_400)  # down this long: reported as lost
    max_cpu: int | None = Field(None, ge=1, le=1024)
    max_memory_gb: float | None = Field(None, gt=0, le=16384)
    max_disk_gb: float | None = Field(None, gt=0, le=1_000_000)
    max_lease_days: float = Field(30.0, gt=0, le=90)
    min_stake: float = Field(1000.0, ge=0)
    allow_non_validators: bool = False
    whitelist_hotkeys: tuple[str, ...] = ()
    blacklist_hotkeys: tuple[str, ...] = ()
    whitelist_coldkeys: tuple[str, ...] = ()
    blacklist_coldkeys: tuple[str, ...] = ()
    data_dir: Path = Path("~/.compute/miner")
    force_embedded: bool = False
    # embedded leases' commands sandboxed from the miner's keys: auto = on off the local demo (sim:)
    lease_sandbox: Literal["auto", "on", "off"] = "auto"
    gpus: tuple[int, ...] | None = None
    no_tenant_isolation: bool = False
    disk_cap_advisory: bool = False  # accept leases whose disk size cannot be held (only watched)
    volume_max_gb: float = Field(1000.0, ge=0, le=1_000_000)  # all persistent volumes; 0 = no volumes
    volume_max_gb_per_renter: float = Field(200.0, ge=0, le=1_000_000)
    volume_retention_days: float = Field(7.0, ge=0, le=365)  # kept after the last lease using it
    volume_quota: Literal["auto", "hard", "watch"] = "auto"
    hosts_file: Path | None = None  # YAML list of Docker hosts to rent out (None: this machine's engine)
    host_check_interval: float = Field(30.0, ge=1, le=3600)  # seconds between checks of the hosts
    disk_check_interval: float = Field(30.0, ge=0, le=3600)  # Docker leases' disk watch; 0 = off
    cpu_share: float = Field(1.0, gt=0, le=1)  # embedded backend: leases answer at this share of speed
    pace_gflops: float = Field(0.0, ge=0, le=1e6)  # embedded: GEMMs answer at cpu_share x this; 0 = off
    # the collateral contract: with a reclaim of this miner's deposit pending, rentals ending past it
    # are refused (compute.miner.cover); both unset: no collateral read
    collateral_rpc: str | None = Field(None, max_length=512)
    collateral_address: str | None = Field(None, max_length=42)

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
    group = parser.add_argument_group("miner")
    group.add_argument("--axon.port", type=int, help="HTTP port of the miner API (default 8091)")
    group.add_argument("--axon.ip", help="bind address of the miner API (default 0.0.0.0)")
    group.add_argument("--axon.external_ip", help="public ip published on chain")
    group.add_argument(
        "--axon.external_port", type=int, help="port published on chain, behind NAT (default: --axon.port)"
    )
    group.add_argument("--miner.backend", help="rental backend: docker|embedded (default docker)")
    group.add_argument(
        "--miner.ssh_port_range", help="host ports for lease SSH/extra ports (default 40000-40999)"
    )
    group.add_argument("--miner.ssh_host", help="host name/ip renters use for SSH (default: external ip)")
    group.add_argument(
        "--miner.base_image", help="docker image of rental containers (default compute-base:cuda)"
    )
    group.add_argument(
        "--miner.templates", help="YAML file of lease templates to offer (default: base_image only)"
    )
    group.add_argument(
        "--miner.price",
        help="asking price in USD, e.g. 'H100=2.50,A100=1.20,base=0.05': per GPU-hour by GPU model, plus "
        "base per lease-hour; renters see it signed and filter by it, validators never read it "
        "(env COMPUTE_MINER_PRICE; default: no price)",
    )
    group.add_argument(
        "--miner.health_interval",
        type=float,
        help="seconds between lease health checks; 0 = off (default 30)",
    )
    group.add_argument(
        "--miner.lease_lost_after",
        type=float,
        help="seconds a lease may stay down before it is reported lost (600)",
    )
    group.add_argument("--miner.max_cpu", type=int, help="most CPUs one lease may ask for")
    group.add_argument("--miner.max_memory_gb", type=float, help="most memory (GB) one lease may ask for")
    group.add_argument("--miner.max_disk_gb", type=float, help="most disk (GB) one lease may ask for")
    group.add_argument("--miner.max_lease_days", type=float, help="longest lease, in days (default 30)")
    group.add_argument("--miner.min_stake", type=float, help="minimum caller stake in TAO (default 1000)")
    group.add_argument(
        "--miner.allow_non_validators",
        action="store_true",
        default=None,
        help="accept callers without a validator permit (still subject to min_stake)",
    )
    for name in ("whitelist_hotkeys", "blacklist_hotkeys", "whitelist_coldkeys", "blacklist_coldkeys"):
        group.add_argument(f"--miner.{name}", nargs="*", help="SS58 addresses (space or comma separated)")
    group.add_argument("--miner.data_dir", help="lease database and backend state (default ~/.compute/miner)")
    group.add_argument(
        "--miner.force_embedded",
        action="store_true",
        default=None,
        help="allow the embedded backend on the mainnet subnet (not recommended)",
    )
    group.add_argument(
        "--miner.lease_sandbox",
        help="auto|on|off: run embedded leases' commands as their own uid with the miner's home, "
        "wallets and data hidden (auto: on except on a simulated chain; needs root)",
    )
    group.add_argument("--miner.gpus", help="comma-separated GPU indices to rent out (default all)")
    group.add_argument(
        "--miner.no_tenant_isolation",
        action="store_true",
        default=None,
        help="run Docker leases without the miner's firewall rules (when iptables is unavailable)",
    )
    group.add_argument(
        "--miner.volume_max_gb", type=float, help="GB of persistent volumes in all; 0 = none (1000)"
    )
    group.add_argument(
        "--miner.volume_max_gb_per_renter", type=float, help="GB of persistent volumes per renter (200)"
    )
    group.add_argument(
        "--miner.volume_retention_days",
        type=float,
        help="days an unused volume is kept after its last lease ended (7)",
    )
    group.add_argument(
        "--miner.volume_quota",
        help="auto|hard|watch: ext4 image per volume (hard, needs root) or measured usage (auto)",
    )
    group.add_argument(
        "--miner.hosts_file",
        help="YAML file of Docker hosts (local or remote engines) to rent out (default: this machine only)",
    )
    group.add_argument(
        "--miner.disk_cap_advisory",
        action="store_true",
        default=None,
        help="accept Docker leases whose disk size this host cannot hold (no storage quota, no "
        "loop-mounted lease disks: not root, a remote engine); the disk watch stops one over its size "
        "(default: such leases are refused)",
    )
    group.add_argument(
        "--miner.disk_check_interval",
        type=float,
        help="seconds between measurements of Docker leases' own disk where its size is advisory "
        "(--miner.disk_cap_advisory); a lease over it is stopped (30; 0 = off)",
    )
    group.add_argument(
        "--miner.host_check_interval",
        type=float,
        help="seconds between checks of the hosts file's hosts; a host back up is reconciled (30)",
    )
    group.add_argument(
        "--miner.cpu_share",
        type=float,
        help="embedded backend: leases answer as a machine this share as fast (demo; default 1)",
    )
    group.add_argument(
        "--miner.pace_gflops",
        type=float,
        help="embedded backend: GEMM answers take at least their work at cpu_share x this many GFLOPS, "
        "a fixed reference instead of the shared CPU's pace (demo; default 0 = off)",
    )
    collateral = parser.add_argument_group("collateral")
    collateral.add_argument(
        "--collateral.rpc",
        help="EVM JSON-RPC URL of the collateral contract: while a reclaim of this miner's deposit is "
        "pending, rentals ending past it are refused (env COMPUTE_COLLATERAL_RPC)",
    )
    collateral.add_argument(
        "--collateral.address", help="the Collateral contract (env COMPUTE_COLLATERAL_ADDRESS)"
    )
    return parser


def miner_from_args(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> MinerSettings:
    merged = environment(ns, env)
    look = _Lookup(ns, merged)
    gpus = look.get("miner.gpus")
    try:
        gpu_indices = None if gpus is None else tuple(int(g) for g in _csv(gpus))
    except ValueError:
        raise SettingsError(f"--miner.gpus: expected comma-separated integers, got {gpus!r}") from None
    values: dict[str, object] = {
        "common": common_from_args(ns, merged),
        "gpus": gpu_indices,
        "allow_non_validators": look.flag("miner.allow_non_validators"),
        "force_embedded": look.flag("miner.force_embedded"),
        "no_tenant_isolation": look.flag("miner.no_tenant_isolation"),
        "disk_cap_advisory": look.flag("miner.disk_cap_advisory"),
    }
    for field, flag in _MINER_FLAGS.items():
        value = look.get(flag)
        if value is not None:
            values[field] = _csv(value) if field.endswith(("_hotkeys", "_coldkeys")) else value
    return _validated(MinerSettings, values)


def parse_miner(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> MinerSettings:
    """Parse the miner's command line (a bad flag: one line on stderr, exit 2)."""
    parser = Parser(prog="neurons/miner.py", description="Compute subnet miner")
    add_miner_args(add_common_args(parser))
    return miner_from_args(parser.parse_args(argv), env)


_MINER_FLAGS = {
    "axon_port": "axon.port",
    "axon_ip": "axon.ip",
    "external_ip": "axon.external_ip",
    "external_port": "axon.external_port",
    "backend": "miner.backend",
    "ssh_port_range": "miner.ssh_port_range",
    "ssh_host": "miner.ssh_host",
    "base_image": "miner.base_image",
    "templates": "miner.templates",
    "cpu_share": "miner.cpu_share",
    "pace_gflops": "miner.pace_gflops",
    "health_interval": "miner.health_interval",
    "price": "miner.price",
    "lease_lost_after": "miner.lease_lost_after",
    "max_cpu": "miner.max_cpu",
    "max_memory_gb": "miner.max_memory_gb",
    "max_disk_gb": "miner.max_disk_gb",
    "max_lease_days": "miner.max_lease_days",
    "min_stake": "miner.min_stake",
    "whitelist_hotkeys": "miner.whitelist_hotkeys",
    "blacklist_hotkeys": "miner.blacklist_hotkeys",
    "whitelist_coldkeys": "miner.whitelist_coldkeys",
    "blacklist_coldkeys": "miner.blacklist_coldkeys",
    "data_dir": "miner.data_dir",
    "volume_max_gb": "miner.volume_max_gb",
    "volume_max_gb_per_renter": "miner.volume_max_gb_per_renter",
    "volume_retention_days": "miner.volume_retention_days",
    "volume_quota": "miner.volume_quota",
    "lease_sandbox": "miner.lease_sandbox",
    "hosts_file": "miner.hosts_file",
    "host_check_interval": "miner.host_check_interval",
    "disk_check_interval": "miner.disk_check_interval",
    "collateral_rpc": "collateral.rpc",
    "collateral_address": "collateral.address",
}
_FLAG_NAMES = {
    **_MINER_FLAGS,
    "netuid": "netuid",
    "network": "subtensor.network",
    "chain_endpoint": "subtensor.chain_endpoint",
    "wallet_name": "wallet.name",
    "wallet_hotkey": "wallet.hotkey",
    "wallet_path": "wallet.path",
    "logging_dir": "logging.logging_dir",
    "gpus": "miner.gpus",
}

__all__ = [
    "MAINNET_NETUID",
    "CommonSettings",
    "MinerSettings",
    "SettingsError",
    "add_common_args",
    "add_miner_args",
    "common_from_args",
    "load_dotenv",
    "miner_from_args",
    "parse_miner",
]
