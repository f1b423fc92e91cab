"""Machine specs of this host: CPU, RAM, disk (with a quick I/O figure), GPUs, Docker, miner version.

What it does: ``collect_specs()`` returns a frozen ``HostSpecs`` with plain-data ``as_dict()``;
each probe degrades to "unknown" (None / empty / ``available=False`` with an error) instead of
raising, so a miner with no Docker or no GPU still reports what it has. The disk figure writes and
reads a small temp file within a time budget (< 0.5 s by default).

What it deliberately does not do: map onto the wire models (``compute.protocol.MachineSpecs`` is
built by the miner app from ``as_dict()``), cache (see ``SpecsCache``), or verify anything: these
are self-reported figures; validators trust only Proof-of-GPU.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from compute import __version__
from compute.specs.gpus import GpuInfo, GpuInventory, collect_gpus

logger = logging.getLogger(__name__)

_MIB = 1024 * 1024


@dataclass(frozen=True)
class CpuSpec:
    model: str
    physical_cores: int
    logical_cores: int
    frequency_mhz: float | None  # current frequency, None when the OS does not say
    architecture: str


@dataclass(frozen=True)
class MemorySpec:
    total_bytes: int
    available_bytes: int


@dataclass(frozen=True)
class DiskSpec:
    path: str
    total_bytes: int
    free_bytes: int
    write_mb_s: float | None  # None when the quick benchmark could not run
    read_mb_s: float | None


@dataclass(frozen=True)
class DockerSpec:
    available: bool
    version: str | None = None
    nvidia_runtime: bool = False
    runtimes: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class HostSpecs:
    cpu: CpuSpec
    memory: MemorySpec
    disk: DiskSpec
    gpus: tuple[GpuInfo, ...]
    gpu_driver_version: str | None
    cuda_version: str | None
    gpu_source: str  # "nvml" | "torch" | "none"
    docker: DockerSpec
    miner_version: str
    os: str
    collected_at: float
    notes: tuple[str, ...] = field(default=())

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    def as_dict(self) -> dict:
        """Plain JSON-ready data (tuples become lists)."""
        return asdict(
            self, dict_factory=lambda items: {k: list(v) if isinstance(v, tuple) else v for k, v in items}
        )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")):
                return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def collect_cpu() -> CpuSpec:
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    physical = psutil.cpu_count(logical=False) or logical
    try:
        freq = psutil.cpu_freq()
        mhz = round(freq.current, 1) if freq and freq.current > 0 else None
    except (OSError, NotImplementedError, AttributeError):
        mhz = None
    return CpuSpec(_cpu_model(), int(physical), int(logical), mhz, platform.machine())


def collect_memory() -> MemorySpec:
    vm = psutil.virtual_memory()
    return MemorySpec(int(vm.total), int(vm.available))


def disk_speed(
    directory: str | os.PathLike[str], size_mb: int = 16, budget_s: float = 0.4
) -> tuple[float, float]:
    """Write then read back a temp file in ``directory``; (write MB/s, read MB/s).

    Writes 1 MiB blocks until ``size_mb`` or half the budget, fsyncs, asks the kernel to drop the
    file's cached pages (so the read touches the disk where the OS allows), then reads within the
    other half. Raises OSError when the directory is not writable.
    """
    block = os.urandom(_MIB)
    half = budget_s / 2
    fd, name = tempfile.mkstemp(prefix=".compute-disk-", dir=directory)
    try:
        start, written = time.perf_counter(), 0
        while written < size_mb * _MIB and time.perf_counter() - start < half:
            written += os.write(fd, block)
        os.fsync(fd)
        write_s = time.perf_counter() - start
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.lseek(fd, 0, os.SEEK_SET)
        start, read = time.perf_counter(), 0
        while read < written and time.perf_counter() - start < half:
            chunk = os.read(fd, _MIB)
            if not chunk:
                break
            read += len(chunk)
        read_s = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(name)
    return written / _MIB / max(write_s, 1e-9), read / _MIB / max(read_s, 1e-9)


def collect_disk(path: str = "/", bench_dir: str | None = None, budget_s: float = 0.4) -> DiskSpec:
    usage = shutil.disk_usage(path)
    write_mb_s: float | None
    read_mb_s: float | None
    try:
        write, read = disk_speed(bench_dir or tempfile.gettempdir(), budget_s=budget_s)
        write_mb_s, read_mb_s = round(write, 1), round(read, 1)
    except OSError as exc:
        logger.warning("disk benchmark skipped dir=%s: %s", bench_dir, exc)
        write_mb_s = read_mb_s = None
    return DiskSpec(str(path), int(usage.total), int(usage.free), write_mb_s, read_mb_s)


def collect_docker(timeout_s: float = 2.0) -> DockerSpec:
    """Ping the Docker engine (bounded by ``timeout_s``) and list its runtimes."""
    try:
        import docker  # local import: the SDK is heavy and optional for validators

        client = docker.from_env(timeout=max(1, int(round(timeout_s))))
    except Exception as exc:  # DockerException, missing SDK, bad DOCKER_HOST
        return DockerSpec(available=False, error=f"docker client: {exc}")
    try:
        client.ping()
        info = client.info()
        runtimes = tuple(sorted((info.get("Runtimes") or {}).keys()))
        version = info.get("ServerVersion")
        return DockerSpec(True, version, "nvidia" in runtimes, runtimes)
    except Exception as exc:  # engine down, permission denied, timeout
        return DockerSpec(available=False, error=f"docker engine: {exc}")
    finally:
        client.close()


def collect_specs(
    disk_path: str = "/",
    bench_dir: str | None = None,
    docker_timeout_s: float = 2.0,
    gpu_inventory: GpuInventory | None = None,
) -> HostSpecs:
    """Collect everything once (about 0.5-1 s: the disk figure and the Docker ping dominate)."""
    gpus = gpu_inventory if gpu_inventory is not None else collect_gpus()
    docker_spec = collect_docker(docker_timeout_s)
    notes = tuple(n for n in (gpus.note, docker_spec.error) if n)
    return HostSpecs(
        cpu=collect_cpu(),
        memory=collect_memory(),
        disk=collect_disk(disk_path, bench_dir),
        gpus=gpus.gpus,
        gpu_driver_version=gpus.driver_version,
        cuda_version=gpus.cuda_version,
        gpu_source=gpus.source,
        docker=docker_spec,
        miner_version=__version__,
        os=f"{platform.system()} {platform.release()}",
        collected_at=time.time(),
        notes=notes,
    )
