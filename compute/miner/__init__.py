"""The miner's request handlers: ``compute.protocol`` bound to ``compute.allocation`` and specs."""

from __future__ import annotations

from compute.miner.app import build_miner_app
from compute.miner.specs import gpu_specs, machine_specs, specs_provider

__all__ = ["build_miner_app", "gpu_specs", "machine_specs", "specs_provider"]
