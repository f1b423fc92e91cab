"""Machine specs: real collection on this host, NVML/torch fallbacks with stand-in drivers, cache."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from compute import __version__
from compute.specs import (
    GpuInfo,
    GpuInventory,
    HostSpecs,
    SpecsCache,
    collect_disk,
    collect_docker,
    collect_gpus,
    collect_specs,
    disk_speed,
)

HAS_NVIDIA = shutil.which("nvidia-smi") is not None
HAS_DOCKER_SOCKET = Path("/var/run/docker.sock").exists()


@pytest.fixture(scope="module")
def host_specs() -> HostSpecs:
    return collect_specs()


def test_real_collection_reports_this_host(host_specs: HostSpecs) -> None:
    assert host_specs.cpu.logical_cores >= host_specs.cpu.physical_cores >= 1
    assert host_specs.cpu.model
    assert host_specs.memory.total_bytes >= host_specs.memory.available_bytes > 0
    assert host_specs.disk.total_bytes >= host_specs.disk.free_bytes > 0
    assert host_specs.disk.write_mb_s and host_specs.disk.write_mb_s > 0
    assert host_specs.disk.read_mb_s and host_specs.disk.read_mb_s > 0
    assert host_specs.miner_version == __version__


@pytest.mark.skipif(HAS_NVIDIA, reason="host has an NVIDIA driver")
def test_host_without_gpu_reports_no_gpus(host_specs: HostSpecs) -> None:
    assert host_specs.gpus == () and host_specs.gpu_count == 0
    assert host_specs.gpu_source == "none"
    assert host_specs.as_dict()["gpus"] == []
    assert any("NVML" in note or "pynvml" in note for note in host_specs.notes)


def test_as_dict_is_plain_json(host_specs: HostSpecs) -> None:
    data = json.loads(json.dumps(host_specs.as_dict()))
    assert data["cpu"]["logical_cores"] == host_specs.cpu.logical_cores
    assert data["docker"]["available"] == host_specs.docker.available
    assert isinstance(data["notes"], list)


def test_specs_are_frozen(host_specs: HostSpecs) -> None:
    with pytest.raises(AttributeError):
        host_specs.cpu = None  # type: ignore[misc]


def test_disk_benchmark_stays_within_budget(tmp_path: Path) -> None:
    start = time.perf_counter()
    write, read = disk_speed(tmp_path, budget_s=0.4)
    assert time.perf_counter() - start < 0.5
    assert write > 0 and read > 0
    assert list(tmp_path.iterdir()) == []  # temp file removed


def test_unwritable_bench_dir_gives_unknown_speed_not_an_error(tmp_path: Path) -> None:
    disk = collect_disk(str(tmp_path), bench_dir=str(tmp_path / "missing"))
    assert (disk.write_mb_s, disk.read_mb_s) == (None, None)
    assert disk.total_bytes > 0


# --- GPUs: stand-in drivers (the only mocks: this host has no GPU) -----------------------------


class _NVMLError(Exception):
    pass


class _LibraryNotFound(_NVMLError):
    pass


def _fake_nvml(
    devices: list[tuple[bytes | str, int, str]], init_error: Exception | None = None
) -> SimpleNamespace:
    def init() -> None:
        if init_error is not None:
            raise init_error

    return SimpleNamespace(
        NVMLError=_NVMLError,
        NVMLError_LibraryNotFound=_LibraryNotFound,
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: b"550.54.15",
        nvmlSystemGetCudaDriverVersion_v2=lambda: 12040,
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: devices[h][0],
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=devices[h][1], free=0, used=0),
        nvmlDeviceGetUUID=lambda h: devices[h][2],
    )


class _Untouchable:
    def __getattr__(self, name: str):
        raise AssertionError(f"torch.{name} must not be used")


def _fake_torch(count: int) -> SimpleNamespace:
    props = SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=85_520_809_984, uuid="1234-abcd")
    cuda = SimpleNamespace(
        is_available=lambda: count > 0, device_count=lambda: count, get_device_properties=lambda i: props
    )
    return SimpleNamespace(cuda=cuda, version=SimpleNamespace(cuda="12.4"))


def test_nvml_lists_every_gpu_with_driver_and_cuda_versions() -> None:
    nvml = _fake_nvml(
        [
            (b"NVIDIA H100 80GB HBM3", 85_520_809_984, "GPU-a"),
            ("NVIDIA H100 80GB HBM3", 85_520_809_984, "GPU-b"),
        ]
    )
    inventory = collect_gpus(nvml=nvml, torch=_Untouchable())
    assert inventory == GpuInventory(
        gpus=(
            GpuInfo(0, "NVIDIA H100 80GB HBM3", 85_520_809_984, "GPU-a"),
            GpuInfo(1, "NVIDIA H100 80GB HBM3", 85_520_809_984, "GPU-b"),
        ),
        driver_version="550.54.15",
        cuda_version="12.4",
        source="nvml",
    )


def test_missing_nvidia_driver_library_skips_torch() -> None:
    inventory = collect_gpus(
        nvml=_fake_nvml([], _LibraryNotFound("NVML Shared Library Not Found")), torch=_Untouchable()
    )
    assert inventory.gpus == () and inventory.source == "none"
    assert "Library Not Found" in (inventory.note or "")


def test_nvml_failure_falls_back_to_torch() -> None:
    inventory = collect_gpus(
        nvml=_fake_nvml([], _NVMLError("Driver/library version mismatch")), torch=_fake_torch(1)
    )
    assert inventory.source == "torch"
    assert inventory.gpus == (GpuInfo(0, "NVIDIA H100 80GB HBM3", 85_520_809_984, "GPU-1234-abcd"),)
    assert inventory.cuda_version == "12.4"


@pytest.mark.skipif(HAS_NVIDIA, reason="host has an NVIDIA driver")
def test_nvml_module_absent_uses_real_torch_and_finds_nothing_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # as if nvidia-ml-py were not installed
    inventory = collect_gpus()
    assert inventory.gpus == () and inventory.source == "none"
    assert "not installed" in (inventory.note or "")


def test_neither_nvml_nor_torch_gives_empty_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    assert collect_gpus() == GpuInventory(note="pynvml (nvidia-ml-py) not installed")


def test_collect_specs_carries_an_injected_inventory() -> None:
    inventory = collect_gpus(
        nvml=_fake_nvml([(b"NVIDIA L4", 24_152_899_584, "GPU-l4")]), torch=_Untouchable()
    )
    specs = collect_specs(gpu_inventory=inventory, docker_timeout_s=1)
    assert specs.gpu_count == 1 and specs.gpus[0].name == "NVIDIA L4"
    assert (specs.gpu_driver_version, specs.cuda_version, specs.gpu_source) == ("550.54.15", "12.4", "nvml")


# --- Docker --------------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_DOCKER_SOCKET, reason="no local Docker engine")
def test_docker_engine_is_detected_with_its_runtimes() -> None:
    docker = collect_docker(timeout_s=2)
    assert docker.available and docker.version and docker.error is None
    assert "runc" in docker.runtimes
    assert docker.nvidia_runtime == ("nvidia" in docker.runtimes)


def test_unreachable_docker_engine_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    start = time.perf_counter()
    docker = collect_docker(timeout_s=1)
    assert time.perf_counter() - start < 3
    assert not docker.available and not docker.nvidia_runtime
    assert docker.error and "docker" in docker.error


# --- cache ---------------------------------------------------------------------------------------


def test_cache_returns_the_same_object_within_ttl() -> None:
    cache = SpecsCache(ttl_s=300)
    first = cache.get()
    start = time.perf_counter()
    assert cache.get() is first
    assert time.perf_counter() - start < 0.01


def test_cache_refreshes_after_ttl_and_on_invalidate(host_specs: HostSpecs) -> None:
    now = [0.0]
    calls: list[int] = []

    def collector() -> HostSpecs:
        calls.append(1)
        return host_specs

    cache = SpecsCache(ttl_s=10, collector=collector, clock=lambda: now[0])
    cache.get()
    now[0] = 9.9
    cache.get()
    assert len(calls) == 1
    now[0] = 10.0
    cache.get()
    cache.invalidate()
    cache.get()
    assert len(calls) == 3


def test_concurrent_callers_trigger_one_collection(host_specs: HostSpecs) -> None:
    calls: list[int] = []

    def slow_collector() -> HostSpecs:
        calls.append(1)
        time.sleep(0.05)
        return host_specs

    cache = SpecsCache(ttl_s=60, collector=slow_collector)
    results: list[HostSpecs] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(results) == 8 and all(r is host_specs for r in results)


def test_cache_rejects_negative_ttl() -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        SpecsCache(ttl_s=-1)
