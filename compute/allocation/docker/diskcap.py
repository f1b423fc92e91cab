"""A Docker lease's disk size held by the kernel: the storage driver's quota, or a filesystem of its own.

Docker enforces ``--storage-opt size`` only on some storage drivers (overlay2 on xfs mounted with
``pquota``, btrfs, zfs, devicemapper): ``quota``. On overlay2 over anything else (ext4, the common
case) the size was advisory, and a watch of the container's layer cannot see what a tenant keeps in
a file it deleted but holds open (2 GB in a 1 GB lease, the host's disk 2 GB fuller, for as long as
it likes). There the lease gets ``loop``: its writable layer is an ext4 filesystem of the lease's
size (``volumes.images``: blocks reserved on the host when it is made, loop-mounted). Between the
container's creation and its start, ``LeaseDisks.attach`` mounts the image over the container's
layer directory (``GraphDriver.Data.UpperDir``'s parent, ``/var/lib/docker/overlay2/<id>``), with
the layer's ``link`` and ``lower`` files and empty ``diff`` and ``work`` directories inside it; the
engine then mounts the container's overlay with its upper and work directories on that filesystem,
so every byte the tenant writes outside its volume (a deleted-but-open file included) is inside the
image: past the size, ENOSPC in the lease, and ``df /`` shows the lease's size. The original
``diff`` and ``work`` are removed under the mount, so a container whose image is not mounted (after
a host reboot, before the miner mounts it again) fails to start instead of writing to the host
disk; ``reattach`` mounts it again before a resume. ``docker rm`` removes the layer directory and
unmounts the image with it; ``detach`` unmounts what is left and deletes the image.

``loop`` needs root, ``mkfs.ext4``, an engine on this host that sees this host's mounts, and
overlay2: ``works`` proves all of it once per engine with a 16 MiB lease that writes 32 MiB.
Where neither works the size cannot be held (``none``): the backend refuses such leases unless the
operator accepted advisory sizes (``--miner.disk_cap_advisory``; then the disk watch stops a lease
over its size at its interval).

Blocking: call from the engine's threads. What it deliberately does not do: choose the mode, or
create containers (``docker.backend``).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Literal

from docker.errors import DockerException

from compute.allocation.docker.spec import disk_quota_supported
from compute.allocation.volumes import images
from compute.allocation.volumes.images import ImageError

log = logging.getLogger(__name__)

DiskCap = Literal["quota", "loop", "none"]
PROBE_MIB = 16
_LAYER_FILES = ("link", "lower")


def layer_dir(container: Any) -> Path:
    """The container's overlay2 layer directory (holding ``diff``, ``work``, ``link``, ``lower``)."""
    driver = container.attrs.get("GraphDriver") or {}
    upper = (driver.get("Data") or {}).get("UpperDir")
    if driver.get("Name") != "overlay2" or not upper:
        raise ImageError(f"container {container.name} is not on overlay2 (driver {driver.get('Name')!r})")
    return Path(upper).parent


class LeaseDisks:
    """The lease disks of one engine: images under ``root`` (``<lease>.img``), mounted on layers."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def image(self, lease_id: str) -> Path:
        return self.root / f"{lease_id}.img"

    def attach(self, lease_id: str, container: Any, size_gb: float) -> None:
        """Make the lease's image and mount it as the (not yet started) container's layer."""
        layer = layer_dir(container)
        image = self.image(lease_id)
        images.make_image(image, size_gb, lease_id, "a lease's disk")
        staging = self.root / "mnt" / lease_id
        try:
            images.mount(image, staging)
            (staging / "lost+found").rmdir()
            for name in _LAYER_FILES:
                shutil.copy2(layer / name, staging / name)
            for name, mode in (("diff", 0o755), ("work", 0o700)):
                (staging / name).mkdir(mode=mode)
                shutil.rmtree(layer / name)  # empty: a not-yet-started container's own layer
            shutil.copystat(layer, staging)
            images.run(["mount", "--move", str(staging), str(layer)])
        except BaseException:
            images.unmount(staging)
            image.unlink(missing_ok=True)
            raise
        finally:
            if staging.exists() and not os.path.ismount(staging):
                staging.rmdir()
        log.info("lease=%s disk of %g GiB mounted as its container's layer", lease_id, size_gb)

    def reattach(self, lease_id: str, container: Any) -> None:
        """Mount the lease's image on its layer again if it is not (after a reboot); nothing for a
        lease without one (made before lease disks, or with an advisory size)."""
        image = self.image(lease_id)
        if not image.exists():
            return
        layer = layer_dir(container)
        if not os.path.ismount(layer):
            images.mount(image, layer)
            log.info("lease=%s disk mounted again on its container's layer", lease_id)

    def detach(self, lease_id: str, layer: Path | None = None) -> None:
        """After the container is removed: unmount whatever is left and delete the image."""
        if layer is not None:
            try:
                images.unmount(layer)
            except ImageError as exc:
                log.warning("lease=%s layer still mounted: %s", lease_id, exc)
        images.unmount(self.root / "mnt" / lease_id)
        self.image(lease_id).unlink(missing_ok=True)
        self.image(lease_id).with_suffix(".partial").unlink(missing_ok=True)

    def works(self, client: Any, image: str) -> bool:
        """Whether a lease disk holds on this engine: a 16 MiB one must stop a 32 MiB write."""
        if not images.tools_present():
            log.warning("lease disks need root and mkfs.ext4")
            return False
        lease_id = f"probe-{uuid.uuid4().hex[:12]}"
        command = f"head -c {2 * PROBE_MIB << 20} /dev/zero > /fill; echo $?"
        container = None
        try:
            container = client.containers.create(image, ["/bin/sh", "-c", command], network_disabled=True)
            self.attach(lease_id, container, PROBE_MIB / 1024)
            container.start()
            container.wait(timeout=60)
            output = container.logs(stdout=True, stderr=True).decode(errors="replace")
            held = "No space left on device" in output
            if not held:
                log.warning("a lease disk did not stop a write past its size here: %s", output[-300:])
            return held
        except (ImageError, DockerException, OSError) as exc:
            log.warning("lease disks do not work here: %s", exc)
            return False
        finally:
            layer = None
            if container is not None:
                try:
                    layer = layer_dir(container)
                except ImageError:
                    pass
                try:
                    container.remove(force=True)
                except DockerException as exc:
                    log.warning("probe container not removed: %s", exc)
            self.detach(lease_id, layer)


def disk_cap_of(client: Any, disks: LeaseDisks | None, image: str, require: bool) -> DiskCap:
    """How the engine behind ``client`` holds a lease's disk size: its storage driver's quota, else
    lease disks where they work (``disks``: None for a remote engine), else nothing."""
    supported, where = disk_quota_supported(client.info())
    cap: DiskCap = "quota" if supported else without_quota(client, disks, image, require, where)
    log.info("lease disk sizes: %s", cap)
    return cap


def without_quota(
    client: Any, disks: LeaseDisks | None, image: str, require: bool, where: str = "this storage driver"
) -> DiskCap:
    """``loop`` when lease disks work on this engine, else ``none`` (logged with what follows)."""
    if disks is not None and disks.works(client, image):
        return "loop"
    log.warning(
        "lease disk sizes cannot be held on %s (no quota; lease disks need root, mkfs.ext4 and a local "
        "engine on overlay2): leases are %s",
        where,
        "refused" if require else "only watched (advisory)",
    )
    return "none"


__all__ = ["DiskCap", "LeaseDisks", "disk_cap_of", "layer_dir", "without_quota"]
