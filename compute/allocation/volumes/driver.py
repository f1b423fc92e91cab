"""Persistent volumes on a Docker engine: named volumes that outlive lease containers.

Each renter volume is a Docker named volume ``compute-vol-<hash>`` (the hash of miner id, owner
hotkey and name, so names never collide between renters or miners) labelled ``compute.managed=1``,
``compute.miner=<miner id>``, ``compute.owner=<hotkey>``, ``compute.volume=<name>`` and
``compute.size_gb``. Two ways of holding the size, chosen once per process (``mode``):

- ``hard``: the volume's data lives in an ext4 filesystem image (a file of ``size_gb`` GiB under
  ``root/images``, its blocks reserved with ``fallocate``, so the host disk can never be
  overcommitted) loop-mounted at ``root/mnt/<volume>``; the Docker volume binds the
  ``data`` directory *inside* that filesystem, so a write past the size fails with ENOSPC in the
  container, and if the image is not mounted (a host reboot) the bind source does not exist and
  the container refuses to start instead of writing to the host disk. Needs root, ``mkfs.ext4``
  and an engine that sees this host's mounts; ``auto`` probes exactly that once.
- ``watch``: a plain ``local`` volume; usage is measured with ``du`` in a throwaway container and
  reported (the keeper refuses new attaches over the size). Used where no hard limit is possible
  (no root, a remote engine).

Either way a new volume must leave a margin of free disk (``images.MARGIN_MIN_BYTES`` or
``images.MARGIN_SHARE`` of the disk); short of it the creation fails with "no space left on
device", which the caller answers as a 507. Images are made and mounted by ``volumes.images``
(shared with the lease disks of ``docker.diskcap``).

Only volumes labelled with this miner's id are ever listed, mounted or removed. Blocking work
runs in threads. What it deliberately does not do: decide who owns what, caps or retention
(:mod:`compute.allocation.volumes.keeper`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from docker.errors import APIError, DockerException, NotFound

from compute.allocation.volumes import images
from compute.allocation.volumes.images import GIB, ImageError

log = logging.getLogger(__name__)

VolumeMode = Literal["auto", "hard", "watch"]
LABEL_VOLUME = "compute.volume"
LABEL_SIZE = "compute.size_gb"
_CMD_TIMEOUT_S = images.CMD_TIMEOUT_S
WATCH_CACHE_S = 60.0  # a watch-mode measurement (a container running du) is reused this long


class VolumeError(ImageError):
    """A volume could not be created, mounted, measured or removed."""


@dataclass(frozen=True)
class FoundVolume:
    """One of this miner's volumes as its Docker labels describe it (for rediscovery)."""

    owner: str
    name: str
    size_gb: float
    docker_name: str


def docker_volume_name(miner_id: str, owner: str, name: str) -> str:
    digest = hashlib.sha256(f"{miner_id}\0{owner}\0{name}".encode()).hexdigest()[:24]
    return f"compute-vol-{digest}"


class DockerVolumes:
    """This miner's volumes on one Docker engine (the client getter is the backend's)."""

    def __init__(
        self,
        client: Callable[[], Any],
        miner_id: str,
        root: Path,
        mode: VolumeMode = "auto",
        helper_image: str = "compute-base:cpu",
    ) -> None:
        self._client = client
        self.miner_id = miner_id
        self.root = Path(root)
        self._mode = mode
        self.helper_image = helper_image
        self._lock = threading.Lock()
        self._measured: dict[str, tuple[float, float]] = {}  # docker name -> (monotonic time, GiB)

    # -- mode --------------------------------------------------------------------------

    @property
    def quota(self) -> Literal["hard", "watch"]:
        """``hard`` or ``watch``; ``auto`` is resolved by a real probe on first use."""
        with self._lock:
            if self._mode == "auto":
                self._mode = "hard" if self._hard_possible() else "watch"
            return self._mode

    def _hard_possible(self) -> bool:
        """Whether a loop-mounted ext4 image bound into a container works on this host and engine."""
        if not images.tools_present():
            log.warning("volume sizes are watched, not enforced: hard limits need root and mkfs.ext4")
            return False
        name = f"compute-vol-probe-{uuid.uuid4().hex[:12]}"
        try:
            self._make_image(name, 16 / 1024)
            self._mount(name)
            (self._data(name) / "probe").write_text("ok")
            client = self._client()
            client.volumes.create(name, driver="local", driver_opts=self._bind_opts(name))
            try:
                self._helper(["sh", "-c", "cat /v/probe > /v/back"], {name: {"bind": "/v"}})
            finally:
                client.volumes.get(name).remove(force=True)
            ok = (self._data(name) / "back").read_text() == "ok"
            if not ok:
                log.warning(
                    "volume sizes are watched, not enforced: a container did not see the host's mount"
                )
        except (ImageError, DockerException, OSError) as exc:
            log.warning(
                "volume sizes are watched, not enforced: loop-mounted images do not work here (%s)", exc
            )
            ok = False
        finally:
            self._destroy_files(name)
        if ok:
            log.info("volume sizes are hard limits (ext4 images, loop-mounted) under %s", self.root)
        return ok

    # -- public API (async) ------------------------------------------------------------

    def docker_name(self, owner: str, name: str) -> str:
        return docker_volume_name(self.miner_id, owner, name)

    async def create(self, owner: str, name: str, size_gb: float) -> None:
        """Make the volume (idempotent: an existing one is only prepared)."""
        await asyncio.to_thread(self._create, owner, name, size_gb)

    async def prepare(self, owner: str, name: str) -> str:
        """Make sure the volume can be mounted now (after a reboot: mount its image); its Docker name."""
        return await asyncio.to_thread(self._prepare, owner, name)

    async def remove(self, owner: str, name: str) -> None:
        """Delete the volume and its data (its Docker volume, mount and image file)."""
        await asyncio.to_thread(self._remove, owner, name)

    async def usage_gb(self, owner: str, name: str) -> float | None:
        """GiB the volume's files use now (None when it cannot be measured)."""
        return await asyncio.to_thread(self._usage_gb, owner, name)

    def cached_usage_gb(self, owner: str, name: str) -> float | None:
        """The last ``usage_gb`` of a watched volume if still fresh, else None; never measures (no
        container is started: safe to call under the allocation lock). Hard volumes: statvfs."""
        dname = self.docker_name(owner, name)
        if self.quota == "hard":
            return self._usage_gb(owner, name)
        cached = self._measured.get(dname)
        return cached[1] if cached is not None and time.monotonic() - cached[0] < WATCH_CACHE_S else None

    async def found(self) -> list[FoundVolume]:
        """This miner's volumes on the engine, by label (another miner's are never listed)."""
        return await asyncio.to_thread(self._found)

    # -- blocking work -----------------------------------------------------------------

    def _labels(self, owner: str, name: str, size_gb: float) -> dict[str, str]:
        return {
            "compute.managed": "1",
            "compute.miner": self.miner_id,
            "compute.owner": owner,
            LABEL_VOLUME: name,
            LABEL_SIZE: f"{size_gb:g}",
        }

    def _create(self, owner: str, name: str, size_gb: float) -> None:
        dname = self.docker_name(owner, name)
        if self.quota == "hard" and not self._image(dname).exists():
            self._make_image(dname, size_gb)
        elif self.quota == "watch" and self._ours(dname) is None:
            self._check_room(size_gb)  # a plain volume cannot reserve: at least the room must be there
        self._ensure_docker_volume(dname, self._labels(owner, name, size_gb))
        log.info(
            "volume=%s owner=%s docker=%s size_gb=%g quota=%s created",
            name,
            owner,
            dname,
            size_gb,
            self.quota,
        )

    def _prepare(self, owner: str, name: str) -> str:
        dname = self.docker_name(owner, name)
        volume = self._ours(dname)
        if volume is None:
            raise VolumeError(f"volume {name!r} of {owner} does not exist on this engine")
        if self.quota == "hard":
            if not self._image(dname).exists():
                raise VolumeError(f"volume {name!r}: its data image is missing")
            if not os.path.ismount(self._mnt(dname)):
                self._mount(dname)
        return dname

    def _ensure_docker_volume(self, dname: str, labels: dict[str, str]) -> None:
        if self._ours(dname) is not None:
            if self.quota == "hard" and not os.path.ismount(self._mnt(dname)):
                self._mount(dname)
            return
        opts: dict[str, str] = {}
        if self.quota == "hard":
            if not os.path.ismount(self._mnt(dname)):
                self._mount(dname)
            opts = self._bind_opts(dname)
        try:
            self._client().volumes.create(dname, driver="local", driver_opts=opts, labels=labels)
        except DockerException as exc:
            raise VolumeError(f"docker volume create {dname} failed: {exc}") from exc

    def _ours(self, dname: str) -> Any | None:
        """The Docker volume if it is this miner's; None when absent; refuses another miner's."""
        try:
            volume = self._client().volumes.get(dname)
        except NotFound:
            return None
        except DockerException as exc:
            raise VolumeError(f"Docker engine error: {exc}") from exc
        if (volume.attrs.get("Labels") or {}).get("compute.miner") != self.miner_id:
            raise VolumeError(f"docker volume {dname} is not this miner's")
        return volume

    def _remove(self, owner: str, name: str) -> None:
        dname = self.docker_name(owner, name)
        volume = self._ours(dname)
        if volume is not None:
            try:
                volume.remove(force=False)
            except APIError as exc:
                raise VolumeError(f"docker volume {dname} is still in use: {exc.explanation or exc}") from exc
        self._destroy_files(dname)
        self._measured.pop(dname, None)
        log.info("volume=%s owner=%s docker=%s removed with its data", name, owner, dname)

    def _usage_gb(self, owner: str, name: str) -> float | None:
        dname = self.docker_name(owner, name)
        try:
            if self.quota == "hard":
                if not os.path.ismount(self._mnt(dname)):
                    return None
                stat = os.statvfs(self._mnt(dname))
                return round((stat.f_blocks - stat.f_bfree) * stat.f_frsize / GIB, 3)
            cached = self._measured.get(dname)
            if cached is not None and time.monotonic() - cached[0] < WATCH_CACHE_S:
                return cached[1]
            out = self._helper(["du", "-sk", "/v"], {dname: {"bind": "/v", "mode": "ro"}})
            used = round(int(out.split()[0]) * 1024 / GIB, 3)
            self._measured[dname] = (time.monotonic(), used)
            return used
        except (ImageError, DockerException, OSError, ValueError, IndexError) as exc:
            log.warning("volume=%s usage not measured: %s", name, exc)
            return None

    def _helper(self, argv: list[str], volumes: dict[str, dict[str, str]]) -> bytes:
        """Run ``argv`` in a throwaway container with ``volumes``; its stdout (VolumeError if it fails).

        Detached, waited for, then removed: ``containers.run(remove=True)`` may lose the output."""
        container = self._client().containers.create(
            self.helper_image, argv, volumes=volumes, network_disabled=True
        )
        try:  # removed whatever happens: a container left "Created" would pin the volume forever
            container.start()
            status = container.wait(timeout=_CMD_TIMEOUT_S)
            out = container.logs(stdout=True, stderr=False)
        finally:
            container.remove(force=True)
        if status.get("StatusCode") != 0:
            raise VolumeError(f"{argv[0]} in a helper container exited {status.get('StatusCode')}")
        return bytes(out)

    def _found(self) -> list[FoundVolume]:
        try:
            volumes = self._client().volumes.list(
                filters={"label": ["compute.managed=1", f"compute.miner={self.miner_id}"]}
            )
        except DockerException as exc:
            raise VolumeError(f"Docker engine error: {exc}") from exc
        found = []
        for volume in volumes:
            labels = volume.attrs.get("Labels") or {}
            if labels.get("compute.miner") != self.miner_id or not labels.get(LABEL_VOLUME):
                continue
            try:
                size = float(labels.get(LABEL_SIZE, "0"))
            except ValueError:
                size = 0.0
            found.append(
                FoundVolume(labels.get("compute.owner", ""), labels[LABEL_VOLUME], size, volume.name)
            )
        return found

    # -- host files (hard mode) ------------------------------------------------------------

    def _image(self, dname: str) -> Path:
        return self.root / "images" / f"{dname}.img"

    def _mnt(self, dname: str) -> Path:
        return self.root / "mnt" / dname

    def _data(self, dname: str) -> Path:
        return self._mnt(dname) / "data"

    def _bind_opts(self, dname: str) -> dict[str, str]:
        return {"type": "none", "o": "bind", "device": str(self._data(dname))}

    def _check_room(self, size_gb: float) -> None:
        """Refuse (``no space left on device``: a 507) unless the disk holds the volume and its margin."""
        images.check_room(self.root, size_gb, "a volume")

    def _make_image(self, dname: str, size_gb: float) -> None:
        """The volume's ext4 image, its blocks *reserved* on the host disk (not sparse: a volume can
        never take another tenant's space), then mounted; its steps are methods, which the crash
        harness kills between (``compute.lab.harness.volcrash``)."""
        images.make_image(self._image(dname), size_gb, dname, "a volume", (self._reserve, self._mkfs))
        self._mount(dname)

    def _reserve(self, path: Path, size: int) -> None:
        images.reserve(path, size)

    def _mkfs(self, path: Path, label: str) -> None:
        images.mkfs(path, label)

    def _mount(self, dname: str) -> None:
        images.mount(self._image(dname), self._mnt(dname))
        self._data(dname).mkdir(exist_ok=True)  # inside the mounted image (a crash may have come first)

    def _destroy_files(self, dname: str) -> None:
        mnt = self._mnt(dname)
        images.unmount(mnt)
        if mnt.exists():
            mnt.rmdir()  # empty once unmounted; never removes data that is still mounted
        for path in (self._image(dname), self._image(dname).with_suffix(".partial")):
            path.unlink(missing_ok=True)


__all__ = ["DockerVolumes", "FoundVolume", "VolumeError", "VolumeMode", "docker_volume_name"]
