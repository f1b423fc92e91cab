"""Map the host's collected specs (``compute.specs.HostSpecs``) onto the wire's ``MachineSpecs``.

The GPU list reported is the one the miner rents out (``--miner.gpus`` may restrict it), so a
validator sees exactly what it can allocate. Advisory only: validators prove GPUs with PoG.
What it deliberately does not do: collect anything (``compute.specs`` does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from compute import __version__
from compute.protocol import GpuSpec, MachineSpecs
from compute.specs import HostSpecs

if TYPE_CHECKING:
    from compute.allocation.hosts.backend import MultiHostBackend
    from compute.allocation.lifecycle.manager import AllocationManager


def gpu_specs(host: HostSpecs, only: Sequence[int] | None = None) -> list[GpuSpec]:
    """The host's GPUs as wire values, restricted to the indices in ``only`` when given."""
    wanted = None if only is None else set(only)
    return [
        GpuSpec(index=g.index, name=g.name[:128], memory_bytes=g.memory_bytes, uuid=g.uuid)
        for g in host.gpus
        if wanted is None or g.index in wanted
    ]


def machine_specs(host: HostSpecs, backend: str, gpus: Sequence[GpuSpec]) -> MachineSpecs:
    def clip(text: str | None, size: int) -> str | None:
        return None if text is None else text[:size]

    return MachineSpecs(
        cpu_model=clip(host.cpu.model, 256) or "unknown",
        cpu_cores=host.cpu.logical_cores,
        cpu_freq_mhz=host.cpu.frequency_mhz or 0.0,
        ram_bytes=host.memory.total_bytes,
        disk_total_bytes=host.disk.total_bytes,
        disk_free_bytes=host.disk.free_bytes,
        disk_write_mbps=host.disk.write_mb_s,
        disk_read_mbps=host.disk.read_mb_s,
        gpus=list(gpus),
        driver_version=clip(host.gpu_driver_version, 64),
        cuda_version=clip(host.cuda_version, 64),
        docker_available=host.docker.available,
        nvidia_runtime=host.docker.nvidia_runtime,
        backend=backend,
        miner_version=__version__,
    )


def specs_provider(
    get_host: Callable[[], HostSpecs], backend: str, gpus: Sequence[GpuSpec]
) -> Callable[[], MachineSpecs]:
    """A blocking provider for ``build_miner_app`` (e.g. over ``SpecsCache(ttl_s).get``)."""
    return lambda: machine_specs(get_host(), backend, gpus)


def fixed_specs(
    gpus: Sequence[GpuSpec],
    *,
    cpu_model: str = "test cpu",
    cpu_cores: int = 2,
    backend: str = "embedded",
    miner_version: str = __version__,
) -> MachineSpecs:
    """Specs of a simulated miner (demo, benchmarks, tests): fixed figures, nothing collected."""
    return MachineSpecs(
        cpu_model=cpu_model,
        cpu_cores=cpu_cores,
        cpu_freq_mhz=0,
        ram_bytes=8 << 30,
        disk_total_bytes=1 << 40,
        disk_free_bytes=1 << 39,
        gpus=list(gpus),
        backend=backend,
        miner_version=miner_version,
    )


def multihost_specs(
    get_host: Callable[[], HostSpecs], backend: MultiHostBackend, manager: AllocationManager
) -> Callable[[], MachineSpecs]:
    """Specs of a multi-host miner: this machine's, every offered GPU, and each host's state."""

    def provide() -> MachineSpecs:
        specs = machine_specs(get_host(), backend.name, manager.gpus)
        return specs.model_copy(update={"hosts": backend.host_specs(), "docker_available": True})

    return provide


__all__ = ["fixed_specs", "gpu_specs", "machine_specs", "multihost_specs", "specs_provider"]
