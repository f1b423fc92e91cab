"""Validator settings: ``--validator.*`` and ``--wandb.*`` flags over environment over ``.env``.

Every flag ``--validator.x`` may also come from ``COMPUTE_VALIDATOR_X`` (``.env`` included);
common flags (wallet, network, netuid, logging) come from ``compute.settings``. Built once in the
entry point and passed down. This module parses and validates only; it opens nothing.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from compute.collateral.settings import CollateralSettings, add_collateral_args, collateral_from_args
from compute.settings import CommonSettings, SettingsError, add_common_args, common_from_args, load_dotenv

_SS58 = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{46,48}$")
_HOTKEY_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class ValidatorSettings(BaseModel):
    """Everything ``neurons/validator.py`` needs, resolved once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    common: CommonSettings
    round_blocks: int = Field(360, ge=1, le=100_000)
    concurrency: int = Field(16, ge=1, le=1024)
    miner_timeout: float = Field(300.0, gt=0, le=3600)
    retries: int = Field(1, ge=0, le=5)
    pog_m: int = Field(8192, ge=8, le=65536)
    pog_n: int = Field(0, ge=0, le=1 << 26)  # 0 = sized from the GPU table and target_seconds
    pog_p: int = Field(8192, ge=8, le=65536)
    target_seconds: float = Field(3.0, gt=0, le=120)
    rows_per_gpu: int = Field(8, ge=1, le=64)
    cols_per_row: int = Field(4, ge=1, le=64)
    ema_alpha: float = Field(0.3, gt=0, le=1)
    missed_decay: float = Field(0.9, ge=0, le=1)
    weights_blocks: int = Field(100, ge=1, le=100_000)
    allow_same_ip: bool = False
    rented_bonus: float = Field(0.0, ge=0, le=10)
    rented_max_age: int = Field(24, ge=0, le=10_000)  # rounds a verification stays fresh while rented
    rented_decay: float = Field(0.95, ge=0, le=1)  # per round past rented_max_age
    lease_seconds: int = Field(600, ge=60, le=86_400)
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda)$")
    data_dir: Path = Path("~/.compute/validator")
    rounds: int = Field(0, ge=0)  # stop after this many rounds (0 = forever)
    memory_passes: int = Field(16, ge=2, le=256)
    sustained_every: int = Field(10, ge=1, le=10_000)  # rounds between sustained runs + host probes per miner
    sustained_seconds: float = Field(60.0, ge=1, le=3600)
    probe_ram_mb: int = Field(512, ge=1, le=1 << 20)
    probe_disk_mb: int = Field(512, ge=1, le=1 << 20)
    cpu_memory_mb: float = Field(2.0, gt=0, le=1 << 16)  # machines without GPUs (the demo): small proofs
    cpu_bandwidth_gbs: float = Field(0.1, gt=0, le=10_000)
    cpu_sustained_seconds: float = Field(1.0, gt=0, le=600)
    trusted_renters: tuple[str, ...] = ()  # operator hotkeys (ss58) whose rentals count as rented
    canary_rate: float = Field(0.1, ge=0, le=1)  # chance per miner per round of a canary rental
    canary_hotkeys: tuple[str, ...] = ()  # renter identities that sign canaries: WALLET/HOTKEY (or HOTKEY)
    canary_source: str = ""  # local address canaries connect from ("" = the default route)
    canary_dwell: float = Field(60.0, ge=0, le=3600)  # longest stay of a canary between its logins
    spread_seconds: float | None = Field(None, ge=0, le=86_400)  # None: half the round interval
    load_budget: float = Field(0.05, ge=0, le=1)  # share of a miner's GPU time all validators may take
    check_seconds: float = Field(45.0, gt=0, le=3600)  # GPU-seconds one validation lease holds
    credit_step: float = Field(0.0, ge=0, le=1)  # consensus step: credits floored onto (1+step)^k
    presence_share: float = Field(0.4, ge=0, le=1)  # of the load budget: presence checks (rest: throughput)
    presence_seconds: float = Field(10.0, gt=0, le=3600)  # GPU-seconds one presence check holds a miner
    presence_window: int = Field(16, ge=1, le=10_000)  # presence checks a credit's share is taken over
    presence_interval: float = Field(0.0, ge=0, le=10_000_000)  # mean s between checks; 0 = from the budget
    wandb_off: bool = False
    wandb_on: bool = False  # log offline without WANDB_API_KEY (with a key, wandb is on anyway)
    wandb_project: str = Field("compute-subnet", min_length=1, max_length=128)
    dashboard_port: int = Field(0, ge=0, le=65535)  # 0 = no dashboard
    dashboard_host: str = Field("127.0.0.1", min_length=1, max_length=255)
    dashboard_full: bool = False  # also the private view, to requests signed by the validator's hotkey
    verify_workers: int = Field(-1, ge=-1, le=256)  # processes recomputing big proofs; -1: one per core
    collateral: CollateralSettings = Field(default_factory=CollateralSettings)  # off without an RPC
    lease_proxy: str = Field("", max_length=1000)  # SSH ProxyCommand to leases, {host} {port}; "" = direct
    distance_share: float = Field(0.02, gt=0, le=1)  # most of a timed interval the round trip may take
    min_timed_s: float = Field(1.0, ge=0, le=30)  # shortest timed GEMM run, at any distance

    @field_validator("trusted_renters", mode="before")
    @classmethod
    def _renters(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(part.strip() for part in value.split(",") if part.strip())
        for hotkey in value if isinstance(value, (list, tuple)) else ():
            if not isinstance(hotkey, str) or not _SS58.fullmatch(hotkey):
                raise ValueError(f"{hotkey!r} is not an ss58 hotkey address")
        return value

    @field_validator("canary_hotkeys", mode="before")
    @classmethod
    def _canary_hotkeys(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(part.strip() for part in value.split(",") if part.strip())
        for name in value if isinstance(value, (list, tuple)) else ():
            parts = name.split("/") if isinstance(name, str) else [None]
            if len(parts) > 2 or not all(
                isinstance(p, str) and _HOTKEY_NAME.fullmatch(p) and p not in (".", "..") for p in parts
            ):
                raise ValueError(
                    f"{name!r} is not WALLET/HOTKEY or a hotkey name of the wallet (letters, digits, '._-')"
                )
        return value

    @field_validator("canary_source")
    @classmethod
    def _canary_source(cls, value: str) -> str:
        if value:
            ipaddress.ip_address(value)  # a ValueError names the bad address
        return value

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return Path(os.path.expanduser(str(value)))

    @property
    def db_path(self) -> Path:
        return self.data_dir / f"validator-{self.common.netuid}.db"


# flag -> (field, type, help)
_FLAGS: dict[str, tuple[str, type, str]] = {
    "validator.round_blocks": ("round_blocks", int, "blocks between PoG rounds (default 360)"),
    "validator.concurrency": ("concurrency", int, "miners tested at once (default 16)"),
    "validator.verify_workers": (
        "verify_workers",
        int,
        "processes recomputing big GEMM proofs (nice +10); 0 = a thread; -1 = one per core (default)",
    ),
    "validator.miner_timeout": ("miner_timeout", float, "seconds allowed per miner test (default 300)"),
    "validator.retries": ("retries", int, "retries of an unreachable miner within a round (default 1)"),
    "validator.pog_m": ("pog_m", int, "rows of the PoG product per GPU (default 8192)"),
    "validator.pog_n": ("pog_n", int, "inner size; 0 = sized from the GPU table (default 0)"),
    "validator.pog_p": ("pog_p", int, "columns of the PoG product per GPU (default 8192)"),
    "validator.target_seconds": (
        "target_seconds",
        float,
        "expected compute seconds per precision (default 3)",
    ),
    "validator.rows_per_gpu": ("rows_per_gpu", int, "rows opened per GPU (default 8)"),
    "validator.cols_per_row": ("cols_per_row", int, "entries checked per opened row (default 4)"),
    "validator.ema_alpha": ("ema_alpha", float, "weight of the newest round in the score EMA (default 0.3)"),
    "validator.missed_decay": ("missed_decay", float, "score factor per round a miner was not tested (0.9)"),
    "validator.weights_blocks": ("weights_blocks", int, "blocks between weight settings (default 100)"),
    "validator.rented_bonus": (
        "rented_bonus",
        float,
        "score bonus of rented GPUs proven present beside their tenants; 0 (default): no receipt shows"
        " a rental cost its renter anything the miner cannot recycle, so a bonus pays self-rentals",
    ),
    "validator.rented_max_age": (
        "rented_max_age",
        int,
        "rounds a verification stays fresh while rented (24)",
    ),
    "validator.rented_decay": ("rented_decay", float, "factor per round past rented_max_age (0.95)"),
    "validator.lease_seconds": ("lease_seconds", int, "duration of the validation lease (default 600)"),
    "validator.device": ("device", str, "worker device: auto|cpu|cuda (default auto)"),
    "validator.data_dir": ("data_dir", str, "state directory (default ~/.compute/validator)"),
    "validator.rounds": ("rounds", int, "stop after this many rounds; 0 = run forever (default 0)"),
    "validator.memory_passes": ("memory_passes", int, "dependent passes of the memory proof (default 16)"),
    "validator.sustained_every": (
        "sustained_every",
        int,
        "rounds between sustained runs and host probes per miner (10)",
    ),
    "validator.sustained_seconds": (
        "sustained_seconds",
        float,
        "length of the sustained-throughput run (default 60)",
    ),
    "validator.probe_ram_mb": (
        "probe_ram_mb",
        int,
        "host RAM proven resident by the memory proof on the host: the most RAM credited (default 512)",
    ),
    "validator.probe_disk_mb": (
        "probe_disk_mb",
        int,
        "disk written, then read back later in the round: the most disk credited (default 512)",
    ),
    "validator.cpu_memory_mb": (
        "cpu_memory_mb",
        float,
        "memory proof size for machines without GPUs (default 2)",
    ),
    "validator.cpu_bandwidth_gbs": (
        "cpu_bandwidth_gbs",
        float,
        "reference GB/s for machines without GPUs (0.1)",
    ),
    "validator.cpu_sustained_seconds": (
        "cpu_sustained_seconds",
        float,
        "sustained run without GPUs (default 1)",
    ),
    "validator.trusted_renters": (
        "trusted_renters",
        str,
        "comma-separated renter hotkeys (ss58) whose leases count as rented, besides validators",
    ),
    "validator.canary_rate": (
        "canary_rate",
        float,
        "chance per miner per round (times the schedule's chance) of a canary rental (default 0.1)",
    ),
    "validator.canary_hotkeys": (
        "canary_hotkeys",
        str,
        "comma-separated renter identities that sign canaries, WALLET/HOTKEY under --wallet.path: each"
        " registered on the subnet under a coldkey no validator holds (a bare HOTKEY of this wallet is"
        " on the validator's coldkey: skipped)",
    ),
    "validator.canary_source": (
        "canary_source",
        str,
        "local IP address canaries connect from (HTTP and SSH), routed apart from the validator's own;"
        " default: the machine's default route",
    ),
    "validator.canary_dwell": (
        "canary_dwell",
        float,
        "longest time a canary stays on its lease between its two logins, in s (default 60)",
    ),
    "validator.spread_seconds": (
        "spread_seconds",
        float,
        "spread a round's miner tests randomly over this many s (default: half the round interval)",
    ),
    "validator.load_budget": (
        "load_budget",
        float,
        "share of a miner's GPU time all validators' proofs may take; 0 = test every round (0.05)",
    ),
    "validator.check_seconds": (
        "check_seconds",
        float,
        "GPU-seconds one validation lease holds a miner, for the load budget (default 45)",
    ),
    "validator.credit_step": (
        "credit_step",
        float,
        "consensus step: floor credits onto a (1+step)^k grid before weights; 0 = off (0)",
    ),
    "validator.presence_share": (
        "presence_share",
        float,
        "share of the load budget spent on presence checks of every miner; the rest on throughput (0.4)",
    ),
    "validator.presence_seconds": (
        "presence_seconds",
        float,
        "GPU-seconds one presence check holds a miner, for the load budget (default 10)",
    ),
    "validator.presence_window": (
        "presence_window",
        int,
        "presence checks a miner's presence share is taken over; a new hotkey ramps up over them (16)",
    ),
    "validator.presence_interval": (
        "presence_interval",
        float,
        "mean seconds between this validator's presence checks; 0 = from the budget (default 0)",
    ),
    "validator.lease_proxy": (
        "lease_proxy",
        str,
        "reach leases' SSH through this command ({host} {port} filled in), e.g. a latency proxy",
    ),
    "validator.distance_share": (
        "distance_share",
        float,
        "timed work is sized so the measured round trip is at most this share of it (default 0.02)",
    ),
    "validator.min_timed_s": (
        "min_timed_s",
        float,
        "every timed GEMM run is made at least this long, near or far, so fixed costs weigh alike (default 1)",
    ),
    "wandb.project": ("wandb_project", str, "wandb project (default compute-subnet)"),
    "dashboard.port": (
        "dashboard_port",
        int,
        "serve the read-only dashboard on this port; 0 = off (default 0)",
    ),
    "dashboard.host": ("dashboard_host", str, "dashboard bind address (default 127.0.0.1, loopback only)"),
}
_SWITCHES = {
    "validator.allow_same_ip": "allow_same_ip",
    "wandb.off": "wandb_off",
    "wandb.on": "wandb_on",
    "dashboard.full": "dashboard_full",
}


def add_validator_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the validator flags (every default None, so environment and .env can fill them)."""
    group = parser.add_argument_group("validator")
    for flag, (_field, kind, text) in _FLAGS.items():
        group.add_argument(f"--{flag}", type=kind, help=text)
    group.add_argument(
        "--validator.allow_same_ip",
        action="store_true",
        default=None,
        help="test several uids behind one IP (default: one uid per IP)",
    )
    group.add_argument("--wandb.off", action="store_true", default=None, help="disable wandb logging")
    group.add_argument(
        "--wandb.on",
        action="store_true",
        default=None,
        help="log rounds to wandb offline without WANDB_API_KEY (default: on only with a key)",
    )
    group.add_argument(
        "--dashboard.full",
        action="store_true",
        default=None,
        help="the dashboard also serves its private view (GPU UUIDs, lease endpoints, shared-device evidence) at "
        "/api/private/overview, only to requests signed by this validator's hotkey (default: public view only)",
    )
    return parser


def validator_from_args(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> ValidatorSettings:
    """Build :class:`ValidatorSettings`; raises ``SettingsError`` naming the bad flag."""
    if env is None:
        env = {**load_dotenv(getattr(ns, "env_file", None) or ".env"), **os.environ}
    values: dict[str, object] = {
        "common": common_from_args(ns, env),
        "collateral": collateral_from_args(ns, env),
    }
    for flag, (field, _kind, _text) in _FLAGS.items():
        value = _lookup(ns, env, flag)
        if value is not None:
            values[field] = value
    for flag, field in _SWITCHES.items():
        value = _lookup(ns, env, flag)
        if value is not None:
            values[field] = (
                value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")
            )
    try:
        return ValidatorSettings(**values)
    except ValidationError as exc:
        names = {field: flag for flag, (field, _k, _t) in _FLAGS.items()} | {
            v: k for k, v in _SWITCHES.items()
        }
        problems = "; ".join(
            f"--{names.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}" for e in exc.errors()
        )
        raise SettingsError(problems) from None


def parse_validator(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> ValidatorSettings:
    parser = argparse.ArgumentParser(prog="neurons/validator.py", description="Compute subnet validator")
    add_collateral_args(add_validator_args(add_common_args(parser)))
    return validator_from_args(parser.parse_args(argv), env)


def _lookup(ns: argparse.Namespace, env: Mapping[str, str], flag: str) -> object:
    value = getattr(ns, flag, None)
    if value is not None:
        return value
    name = "COMPUTE_" + flag.replace(".", "_").upper()
    return env.get(name) or None
