"""Helpers for validator tests: real miners (signed app + embedded backend) on 127.0.0.1, some of
which run a cheating worker, a simulated chain, and the validator's client.

A cheating miner is an ordinary miner whose lease environment puts a directory first on PATH in
which ``python3`` is a wrapper that runs ``cheaters/cheat_worker.py MODE`` (through the embedded
backend's public ``path_prefix`` argument, as an operator would shape the lease environment).
"""

from __future__ import annotations

import itertools
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from portspace import OFFSET

from compute.allocation import AllocationManager, EmbeddedBackend
from compute.chain import SimChainState, connect
from compute.protocol import GpuSpec
from compute.scoring import ScoringConfig, load_gpu_table
from compute.transport import KeyWallet, MinerClient
from compute.validator import DepthParams, RoundParams, ValidatorContext
from compute.validator.params import LockstepParams

CHEAT_WORKER = Path(__file__).with_name("cheaters") / "cheat_worker.py"
_PORTS = itertools.count()
FAKE_GPU = GpuSpec(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 10**9, uuid="GPU-0")


def cheat_bin(root: Path, mode: str) -> Path:
    directory = root / f"cheat-{mode}"
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -u "{CHEAT_WORKER}" {mode}\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def port_block() -> tuple[int, int]:
    base = OFFSET + 44000 + (os.getpid() % 50) * 60 + (next(_PORTS) % 12) * 5
    return base, base + 4


@dataclass
class Miner:
    name: str
    endpoint: str
    hotkey: str
    wallet: object
    manager: AllocationManager
    backend: EmbeddedBackend


def small_params(**overrides) -> RoundParams:
    values = dict(
        round_id=1,
        block=1,
        miner_timeout=60.0,
        retries=0,
        pog_m=64,
        pog_n=4096,
        pog_p=64,
        lease_seconds=120,
        lease_memory_gb=2.0,
        device="cpu",
    )
    values.update(overrides)
    return RoundParams(**values)


# A claimed GPU emulated at this CPU's scale, for the proof beside a rented GPU's tenant: a few MB
# of it, a regeneration rate this CPU beats by far, no host-link floor (here the CPU's memory is the
# device), and the CPU's lead slack (every worker shares two cores with the validator).
EMULATED_GPU = DepthParams(beside_share=2.5e-5, gpu_regen_rate=1e5, gpu_host_stream_gbs=0.0)


def emulated_params(**overrides) -> RoundParams:
    """``small_params`` with claimed GPUs emulated on this CPU (``EMULATED_GPU``)."""
    values = {"depth": EMULATED_GPU, "lockstep": LockstepParams(lead_slack_s=1.8), **overrides}
    return small_params(**values)


def validator_context(chain, store, client, **fields) -> ValidatorContext:
    """The validator's collaborators for a test: its hotkey the client's, small CPU rounds
    (``small_params``), the shipped GPU table, default scoring, and every uid of an IP tested (the
    test miners all live on 127.0.0.1); ``fields`` set any of the context's fields."""
    values = {
        "params": small_params(),
        "table": load_gpu_table(),
        "scoring": ScoringConfig(),
        "allow_same_ip": True,
        **fields,
    }
    hotkey = values.pop("hotkey", None) or client.hotkey
    return ValidatorContext(chain, store, client, hotkey, **values)


def register_and_serve(chain_path: Path, state: SimChainState, miner: Miner) -> int:
    uid = state.register(miner.hotkey, miner.wallet.coldkeypub.ss58_address, 10.0, False)
    host, port = miner.endpoint.rsplit(":", 1)
    chain = connect(f"sim:{chain_path}", 27)
    try:
        chain.serve(miner.wallet, host, int(port))
    finally:
        chain.close()
    return uid


@asynccontextmanager
async def validator_client_of(wallet, timeout: float) -> AsyncIterator[MinerClient]:
    """The validator's signed client for ``wallet`` (``wallet_obj`` attached), closed on the way out."""
    client = MinerClient(KeyWallet.from_wallet(wallet), timeout=timeout)
    client.wallet_obj = wallet  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        await client.aclose()
