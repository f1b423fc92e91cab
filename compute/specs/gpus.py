"""GPU inventory of this host: NVML (nvidia-ml-py) first, torch.cuda as fallback, else empty.

What it does: lists NVIDIA GPUs (index, name, memory, UUID) with driver and CUDA driver versions.
NVML is preferred (no CUDA context, no torch import). torch is tried only when the NVML module is
not installed or NVML fails for a reason other than a missing driver library: without
libnvidia-ml there is no NVIDIA driver, so torch could not see a GPU either.

What it deliberately does not do: measure or verify anything. These figures are the miner's own
report; the validator trusts only Proof-of-GPU (``compute.pog``).
"""

from __future__ import annotations

import importlib
import logging
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

logger = logging.getLogger(__name__)

GpuSource = Literal["nvml", "torch", "none"]


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the local driver reports it."""

    index: int
    name: str
    memory_bytes: int
    uuid: str | None


@dataclass(frozen=True)
class GpuInventory:
    """All GPUs plus the software stack that reported them; ``gpus`` is empty without a GPU."""

    gpus: tuple[GpuInfo, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    source: GpuSource = "none"
    note: str | None = None  # why the list is empty / which path failed


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _import(name: str) -> ModuleType | None:
    if name in sys.modules and sys.modules[name] is None:  # explicitly blocked (tests, sandboxes)
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _cuda_version(code: int) -> str:
    """NVML encodes the CUDA driver API version as 1000*major + 10*minor (12040 -> "12.4")."""
    return f"{code // 1000}.{(code % 1000) // 10}"


def gpus_via_nvml(nvml: ModuleType) -> GpuInventory:
    """Query NVML; raises the module's ``NVMLError`` subclasses on failure."""
    nvml.nvmlInit()
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            cuda = _cuda_version(int(nvml.nvmlSystemGetCudaDriverVersion_v2()))
        except (AttributeError, nvml.NVMLError):
            cuda = None
        gpus = []
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            try:
                uuid: str | None = _text(nvml.nvmlDeviceGetUUID(handle))
            except nvml.NVMLError:
                uuid = None
            memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
            gpus.append(GpuInfo(index, _text(nvml.nvmlDeviceGetName(handle)), memory, uuid))
        return GpuInventory(tuple(gpus), driver, cuda, "nvml")
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:  # pragma: no cover - shutdown after a failed init
            pass


def gpus_via_torch(torch: ModuleType) -> GpuInventory:
    """Query torch.cuda (creates no tensors); empty inventory when CUDA is unavailable."""
    if not torch.cuda.is_available():
        return GpuInventory(note="torch: CUDA not available")
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)
        gpus.append(GpuInfo(index, str(props.name), int(props.total_memory), f"GPU-{uuid}" if uuid else None))
    return GpuInventory(tuple(gpus), None, torch.version.cuda, "torch")


def gpu_busy_percent(indices: tuple[int, ...], nvml: ModuleType | None = None) -> float | None:
    """The highest NVML utilisation (%) of the GPUs at ``indices`` now; None when NVML cannot say
    (no module, no driver, an index it does not know). Used by the idle watch: None means busy."""
    nvml = nvml if nvml is not None else _import("pynvml")
    if nvml is None or not indices:
        return None
    try:
        nvml.nvmlInit()
    except Exception:  # NVMLError subclasses, or a broken binding
        return None
    try:
        return float(
            max(nvml.nvmlDeviceGetUtilizationRates(nvml.nvmlDeviceGetHandleByIndex(i)).gpu for i in indices)
        )
    except Exception:
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # pragma: no cover - shutdown after a failed query
            pass


def collect_gpus(nvml: ModuleType | None = None, torch: ModuleType | None = None) -> GpuInventory:
    """GPU inventory via NVML, else torch, else empty; never raises (the reason goes in ``note``).

    ``nvml`` / ``torch`` default to importing ``pynvml`` / ``torch``; tests pass stand-ins.
    """
    nvml = nvml if nvml is not None else _import("pynvml")
    try_torch = True
    note = "pynvml (nvidia-ml-py) not installed"
    if nvml is not None:
        try:
            return gpus_via_nvml(nvml)
        except Exception as exc:  # NVMLError subclasses, or a broken binding
            note = f"NVML unavailable: {exc}"
            not_found = getattr(nvml, "NVMLError_LibraryNotFound", None)
            try_torch = not (isinstance(not_found, type) and isinstance(exc, not_found))
    if try_torch:
        torch = torch if torch is not None else _import("torch")
        if torch is not None:
            try:
                found = gpus_via_torch(torch)
                return found if found.gpus else GpuInventory(note=f"{note}; {found.note}")
            except Exception as exc:
                note = f"{note}; torch.cuda failed: {exc}"
    logger.debug("no GPUs found: %s", note)
    return GpuInventory(note=note)
