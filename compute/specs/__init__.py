"""Machine specs collection: CPU, RAM, disk, GPUs (NVML / torch), Docker, miner version."""

from __future__ import annotations

from compute.specs.cache import SpecsCache
from compute.specs.collect import (
    CpuSpec,
    DiskSpec,
    DockerSpec,
    HostSpecs,
    MemorySpec,
    collect_cpu,
    collect_disk,
    collect_docker,
    collect_memory,
    collect_specs,
    disk_speed,
)
from compute.specs.gpus import GpuInfo, GpuInventory, collect_gpus, gpu_busy_percent

__all__ = [
    "CpuSpec",
    "DiskSpec",
    "DockerSpec",
    "GpuInfo",
    "GpuInventory",
    "HostSpecs",
    "MemorySpec",
    "SpecsCache",
    "collect_cpu",
    "collect_disk",
    "collect_docker",
    "collect_gpus",
    "collect_memory",
    "collect_specs",
    "disk_speed",
    "gpu_busy_percent",
]
