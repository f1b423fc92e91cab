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

from pydantic import Field, field_validator

from compute.collateral.settings import CollateralSettings, add_collateral_args, collateral_from_args
from compute.flags import Layered, add_flags, environment, flag
from compute.settings import CommonSettings, add_common_args, common_from_args

_SS58 = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{46,48}$")
_HOTKEY_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class ValidatorSettings(Layered):
    """Everything ``neurons/validator.py`` needs, resolved once."""

    common: CommonSettings
    round_blocks: int = flag(
        "validator.round_blocks", 360, "blocks between PoG rounds (default {default})", ge=1, le=100_000
    )
    concurrency: int = flag(
        "validator.concurrency", 16, "miners tested at once (default {default})", ge=1, le=1024
    )
    verify_workers: int = flag(
        "validator.verify_workers",
        -1,
        "processes recomputing big GEMM proofs (nice +10); 0 = a thread; -1 = one per core (default)",
        ge=-1,
        le=256,
    )
    miner_timeout: float = flag(
        "validator.miner_timeout", 300.0, "seconds allowed per miner test (default {default})", gt=0, le=3600
    )
    retries: int = flag(
        "validator.retries",
        1,
        "retries of an unreachable miner within a round (default {default})",
        ge=0,
        le=5,
    )
    pog_m: int = flag(
        "validator.pog_m", 8192, "rows of the PoG product per GPU (default {default})", ge=8, le=65536
    )
    pog_n: int = flag(
        "validator.pog_n", 0, "inner size; 0 = sized from the GPU table (default {default})", ge=0, le=1 << 26
    )
    pog_p: int = flag(
        "validator.pog_p", 8192, "columns of the PoG product per GPU (default {default})", ge=8, le=65536
    )
    target_seconds: float = flag(
        "validator.target_seconds",
        3.0,
        "expected compute seconds per precision (default {default})",
        gt=0,
        le=120,
    )
    rows_per_gpu: int = flag(
        "validator.rows_per_gpu", 8, "rows opened per GPU (default {default})", ge=1, le=64
    )
    cols_per_row: int = flag(
        "validator.cols_per_row", 4, "entries checked per opened row (default {default})", ge=1, le=64
    )
    ema_alpha: float = flag(
        "validator.ema_alpha",
        0.3,
        "weight of the newest round in the score EMA (default {default})",
        gt=0,
        le=1,
    )
    missed_decay: float = flag(
        "validator.missed_decay", 0.9, "score factor per round a miner was not tested ({default})", ge=0, le=1
    )
    weights_blocks: int = flag(
        "validator.weights_blocks",
        100,
        "blocks between weight settings (default {default})",
        ge=1,
        le=100_000,
    )
    rented_bonus: float = flag(
        "validator.rented_bonus",
        0.0,
        "score bonus of rented GPUs proven present beside their tenants; 0 (default): no receipt shows a rental cost its renter anything the miner cannot recycle, so a bonus pays self-rentals",
        ge=0,
        le=10,
    )
    rented_max_age: int = flag(
        "validator.rented_max_age",
        24,
        "rounds a verification stays fresh while rented ({default})",
        ge=0,
        le=10_000,
    )
    rented_decay: float = flag(
        "validator.rented_decay", 0.95, "factor per round past rented_max_age ({default})", ge=0, le=1
    )
    lease_seconds: int = flag(
        "validator.lease_seconds",
        600,
        "duration of the validation lease (default {default})",
        ge=60,
        le=86_400,
    )
    device: str = flag(
        "validator.device",
        "auto",
        "worker device: auto|cpu|cuda (default {default})",
        pattern=r"^(auto|cpu|cuda)$",
    )
    data_dir: Path = flag(
        "validator.data_dir", Path("~/.compute/validator"), "state directory (default {default})"
    )
    rounds: int = flag(
        "validator.rounds", 0, "stop after this many rounds; 0 = run forever (default {default})", ge=0
    )
    memory_passes: int = flag(
        "validator.memory_passes",
        16,
        "dependent passes of the memory proof (default {default})",
        ge=2,
        le=256,
    )
    sustained_every: int = flag(
        "validator.sustained_every",
        10,
        "rounds between sustained runs and host probes per miner ({default})",
        ge=1,
        le=10_000,
    )
    sustained_seconds: float = flag(
        "validator.sustained_seconds",
        60.0,
        "length of the sustained-throughput run (default {default})",
        ge=1,
        le=3600,
    )
    probe_ram_mb: int = flag(
        "validator.probe_ram_mb",
        512,
        "host RAM proven resident by the memory proof on the host: the most RAM credited (default {default})",
        ge=1,
        le=1 << 20,
    )
    probe_disk_mb: int = flag(
        "validator.probe_disk_mb",
        512,
        "disk written, then read back later in the round: the most disk credited (default {default})",
        ge=1,
        le=1 << 20,
    )
    cpu_memory_mb: float = flag(
        "validator.cpu_memory_mb",
        2.0,
        "memory proof size for machines without GPUs (default {default})",
        gt=0,
        le=1 << 16,
    )
    cpu_bandwidth_gbs: float = flag(
        "validator.cpu_bandwidth_gbs",
        0.1,
        "reference GB/s for machines without GPUs ({default})",
        gt=0,
        le=10_000,
    )
    cpu_sustained_seconds: float = flag(
        "validator.cpu_sustained_seconds", 1.0, "sustained run without GPUs (default {default})", gt=0, le=600
    )
    trusted_renters: tuple[str, ...] = flag(
        "validator.trusted_renters",
        (),
        "comma-separated renter hotkeys (ss58) whose leases count as rented, besides validators",
    )
    canary_rate: float = flag(
        "validator.canary_rate",
        0.1,
        "chance per miner per round (times the schedule's chance) of a canary rental (default {default})",
        ge=0,
        le=1,
    )
    canary_hotkeys: tuple[str, ...] = flag(
        "validator.canary_hotkeys",
        (),
        "comma-separated renter identities that sign canaries, WALLET/HOTKEY under --wallet.path: each registered on the subnet under a coldkey no validator holds (a bare HOTKEY of this wallet is on the validator's coldkey: skipped)",
    )
    canary_source: str = flag(
        "validator.canary_source",
        "",
        "local IP address canaries connect from (HTTP and SSH), routed apart from the validator's own; default: the machine's default route",
    )
    canary_dwell: float = flag(
        "validator.canary_dwell",
        60.0,
        "longest time a canary stays on its lease between its two logins, in s (default {default})",
        ge=0,
        le=3600,
    )
    spread_seconds: float | None = flag(
        "validator.spread_seconds",
        None,
        "spread a round's miner tests randomly over this many s (default: half the round interval)",
        ge=0,
        le=86_400,
    )
    load_budget: float = flag(
        "validator.load_budget",
        0.05,
        "share of a miner's GPU time all validators' proofs may take; 0 = test every round ({default})",
        ge=0,
        le=1,
    )
    check_seconds: float = flag(
        "validator.check_seconds",
        45.0,
        "GPU-seconds one validation lease holds a miner, for the load budget (default {default})",
        gt=0,
        le=3600,
    )
    credit_step: float = flag(
        "validator.credit_step",
        0.0,
        "consensus step: floor credits onto a (1+step)^k grid before weights; 0 = off ({default})",
        ge=0,
        le=1,
    )
    presence_share: float = flag(
        "validator.presence_share",
        0.4,
        "share of the load budget spent on presence checks of every miner; the rest on throughput ({default})",
        ge=0,
        le=1,
    )
    presence_seconds: float = flag(
        "validator.presence_seconds",
        10.0,
        "GPU-seconds one presence check holds a miner, for the load budget (default {default})",
        gt=0,
        le=3600,
    )
    presence_window: int = flag(
        "validator.presence_window",
        16,
        "presence checks a miner's presence share is taken over; a new hotkey ramps up over them ({default})",
        ge=1,
        le=10_000,
    )
    presence_interval: float = flag(
        "validator.presence_interval",
        0.0,
        "mean seconds between this validator's presence checks; 0 = from the budget (default {default})",
        ge=0,
        le=10_000_000,
    )
    lease_proxy: str = flag(
        "validator.lease_proxy",
        "",
        "reach leases' SSH through this command ({host} {port} filled in), e.g. a latency proxy",
        max_length=1000,
    )
    distance_share: float = flag(
        "validator.distance_share",
        0.02,
        "timed work is sized so the measured round trip is at most this share of it (default {default})",
        gt=0,
        le=1,
    )
    min_timed_s: float = flag(
        "validator.min_timed_s",
        1.0,
        "every timed GEMM run is made at least this long, near or far, so fixed costs weigh alike (default {default})",
        ge=0,
        le=30,
    )
    wandb_project: str = flag(
        "wandb.project",
        "compute-subnet",
        "wandb project (default {default})",
        min_length=1,
        max_length=128,
    )
    dashboard_port: int = flag(
        "dashboard.port",
        0,
        "serve the read-only dashboard on this port; 0 = off (default {default})",
        ge=0,
        le=65535,
    )
    dashboard_host: str = flag(
        "dashboard.host",
        "127.0.0.1",
        "dashboard bind address (default {default}, loopback only)",
        min_length=1,
        max_length=255,
    )
    allow_same_ip: bool = flag(
        "validator.allow_same_ip", False, "test several uids behind one IP (default: one uid per IP)"
    )
    wandb_off: bool = flag("wandb.off", False, "disable wandb logging")
    wandb_on: bool = flag(
        "wandb.on", False, "log rounds to wandb offline without WANDB_API_KEY (default: on only with a key)"
    )
    dashboard_full: bool = flag(
        "dashboard.full",
        False,
        "the dashboard also serves its private view (GPU UUIDs, lease endpoints, shared-device evidence) at /api/private/overview, only to requests signed by this validator's hotkey (default: public view only)",
    )
    collateral: CollateralSettings = Field(default_factory=CollateralSettings)  # off without an RPC

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


def add_validator_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the validator flags (every default None, so environment and .env can fill them)."""
    add_flags(parser.add_argument_group("validator"), ValidatorSettings)
    return parser


def validator_from_args(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> ValidatorSettings:
    """Build :class:`ValidatorSettings`; raises ``SettingsError`` naming the bad flag."""
    env = environment(ns, env)
    return ValidatorSettings.layered(
        ns, env, common=common_from_args(ns, env), collateral=collateral_from_args(ns, env)
    )


def parse_validator(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> ValidatorSettings:
    parser = argparse.ArgumentParser(prog="neurons/validator.py", description="Compute subnet validator")
    add_collateral_args(add_validator_args(add_common_args(parser)))
    return validator_from_args(parser.parse_args(argv), env)
