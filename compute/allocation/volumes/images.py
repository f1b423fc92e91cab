"""Filesystem images of a fixed size, their blocks reserved, loop-mounted: a size the kernel holds.

Both a renter's persistent volume (``volumes.driver``, hard mode) and a Docker lease's own disk
(``docker.diskcap``) are an ext4 filesystem in an image file of the size asked for, loop-mounted on
the host: a write past the size fails with ENOSPC inside the lease, whatever the lease does (a file
kept open after it was deleted still holds its blocks *inside* the image). The image's blocks are
reserved on the host disk when it is made (``fallocate``, and ``mkfs -E nodiscard`` so they are not
punched out again), so the host's disk can never be overcommitted by leases, and a new image must
leave a margin of free disk (``MARGIN_MIN_BYTES`` or ``MARGIN_SHARE`` of it); short of either the
creation fails with "no space left on device" (answered as a 507).

Needs root, ``mkfs.ext4`` and ``mount``. Blocking: call from a thread. What it deliberately does not
do: decide what an image is for, or where it is mounted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from compute.allocation.lease.backend import BackendError

GIB = 1024**3
CMD_TIMEOUT_S = 120.0
MARGIN_MIN_BYTES = 256 * 1024**2  # free disk a new image must leave: at least this ...
MARGIN_SHARE = 0.02  # ... or this share of the disk, whichever is more


class ImageError(BackendError):
    """An image could not be made, mounted or removed (its message says why)."""


def tools_present() -> bool:
    """Root, ``mkfs.ext4`` and ``mount``: what making and mounting images needs."""
    return os.geteuid() == 0 and bool(shutil.which("mkfs.ext4") and shutil.which("mount"))


def run(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CMD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ImageError(f"{argv[0]} failed: {exc}") from exc
    if done.returncode != 0:
        raise ImageError(f"{' '.join(argv[:2])} failed: {(done.stderr or done.stdout).strip()[-300:]}")


def check_room(directory: Path, size_gb: float, what: str) -> None:
    """Refuse (``no space left on device``: a 507) unless the disk under ``directory`` holds
    ``size_gb`` more and still keeps its margin for everything else (leases, stores, logs)."""
    directory.mkdir(parents=True, exist_ok=True)
    disk = shutil.disk_usage(directory)
    margin = max(MARGIN_MIN_BYTES, int(disk.total * MARGIN_SHARE))
    if disk.free - int(size_gb * GIB) < margin:
        raise ImageError(
            f"no space left on device for {what} of {size_gb:g} GiB: {disk.free / GIB:.2f} GiB free, "
            f"{margin / GIB:.2f} GiB kept for the rest of the machine"
        )


def reserve(path: Path, size: int) -> None:
    """``path`` holding ``size`` bytes of blocks that are its own from now on (not sparse)."""
    with open(path, "wb") as file:
        try:
            os.posix_fallocate(file.fileno(), 0, size)
        except OSError as exc:
            raise ImageError(f"cannot reserve {size / GIB:g} GiB: {exc}") from exc


def mkfs(path: Path, label: str) -> None:
    # nodiscard: mke2fs would otherwise punch the reserved blocks back out of a regular file
    run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard", "-L", label[-16:], str(path)])


def make_image(
    image: Path,
    size_gb: float,
    label: str,
    what: str,
    steps: tuple[Callable[[Path, int], None], Callable[[Path, str], None]] = (reserve, mkfs),
) -> None:
    """An ext4 image of ``size_gb`` GiB at ``image``, its blocks *reserved* on the host disk (never
    sparse), written as ``.partial`` and renamed when complete: a crash leaves no half-made image.
    ``steps``: the reserve and mkfs to call (the volume crash harness hooks each)."""
    image.parent.mkdir(parents=True, exist_ok=True)
    partial = image.with_suffix(".partial")
    do_reserve, do_mkfs = steps
    try:
        check_room(image.parent, size_gb, what)
        do_reserve(partial, int(size_gb * GIB))
        do_mkfs(partial, label)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.rename(image)


def mount(image: Path, target: Path) -> None:
    """Loop-mount ``image`` on ``target`` (made if missing; nothing when already mounted there).

    ``noinit_itable``: ext4 would otherwise zero its inode tables in the background, which the loop
    device turns into holes punched in the image, giving reserved blocks back to the host."""
    target.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(target):
        run(["mount", "-o", "loop,nodev,nosuid,noinit_itable", str(image), str(target)])


def unmount(target: Path) -> None:
    """Unmount ``target`` if something is mounted there (its loop device goes with it)."""
    if os.path.ismount(target):
        run(["umount", str(target)])


__all__ = [
    "GIB",
    "ImageError",
    "check_room",
    "make_image",
    "mkfs",
    "mount",
    "reserve",
    "run",
    "tools_present",
    "unmount",
]
