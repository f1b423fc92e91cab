"""Copies to and from a lease over SFTP that end, and never leave a partial file that looks whole.

A lease is the renter's, but the machine is the miner's: its SFTP server may stop answering while
the SSH connection stays alive (keep-alives answered), drip a byte at a time, list garbage, or
claim a file larger than the renter's disk. So:

- **Progress, not patience** (``Progress``, ``watched``): a copy must move ``min_bytes`` (64 KiB;
  each file or directory finished counts 4 KiB) in every ``idle_s`` (30 s) or it fails
  (``TransferStalled``), however the peer stalls: silent, dripping, or never answering
  one request among many. A live copy at 3 KB/s or more never trips it.
- **Downloads land under their name only when complete**: each file is written to
  ``NAME.<tag>.partial`` beside it (the tag names the remote path, size and mtime), synced, then
  renamed over ``NAME``. A copy that fails keeps the partial cut back to its last contiguous byte,
  and the same copy run again resumes from there, unless the remote file changed (another tag: the
  old partial is removed). A file larger than the free space of the local disk is refused before
  a byte is written; a disk that fills up mid-copy fails with ``TransferFailed``, nothing renamed.
- **Uploads** are written to ``NAME.<random>.partial`` on the lease and renamed over ``NAME`` when
  complete (removed, best effort, when not).
- Reads and writes are pipelined (``depth`` requests of ``block`` bytes in flight), so a far lease
  is not paced by its round trip; a peer answering more than was asked gets only what was asked.
- Remote names are checked (no ``/``, ``..``, NUL, no name twice in one directory) and nothing is
  written through a local symbolic link; symbolic links are copied as links.

Deliberately not here: connecting (``shell.LeaseShell``), the ``cat`` fallback of a lease without
SFTP (``shell``), printing.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import posixpath
import secrets
import shutil
import stat
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from compute.operator.errors import TransferFailed, TransferStalled

T = TypeVar("T")
FILE_CREDIT = 4096  # progress one finished file or directory counts for
CANCEL_WAIT_S = 5.0  # how long a stalled copy's work is given to unwind
_BAD_NAMES = {"", ".", ".."}


@dataclass(frozen=True)
class TransferLimits:
    """When a copy counts as stalled, and how it is pipelined."""

    idle_s: float = 30.0
    min_bytes: int = 64 * 1024
    block: int = 64 * 1024
    depth: int = 32

    def __post_init__(self) -> None:
        if not 0 < self.idle_s <= 86_400:
            raise ValueError(f"the idle timeout must be in (0, 86400] seconds, got {self.idle_s:g}")


class Progress:
    """Bytes moved; the moment the copy last moved ``min_bytes`` (the stall clock restarts there)."""

    def __init__(self, limits: TransferLimits) -> None:
        self.limits = limits
        self.moved = 0
        self._mark_at = time.monotonic()
        self._mark_bytes = 0

    def add(self, count: int) -> None:
        self.moved += count
        if self.moved - self._mark_bytes >= self.limits.min_bytes:
            self._mark_at, self._mark_bytes = time.monotonic(), self.moved

    def finished_one(self) -> None:
        """A file or directory is done: progress even when it was small."""
        self.add(FILE_CREDIT)

    @property
    def deadline(self) -> float:
        return self._mark_at + self.limits.idle_s


async def watched(work: Awaitable[T], progress: Progress, what: str) -> T:
    """``work``'s result, or ``TransferFailed`` once it stalls (see ``Progress``); the work is
    cancelled then (and with the caller)."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            left = progress.deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.wait({task}, timeout=left)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_WAIT_S)
    limits = progress.limits
    raise TransferStalled(
        f"{what} stalled: less than {limits.min_bytes // 1024} KiB moved in {limits.idle_s:g} s "
        f"({progress.moved} bytes in all); the lease's SFTP stopped answering"
    )


def partial_name(name: str, remote: str, size: int, mtime: int | None) -> str:
    """The partial file of a download: the same remote file (path, size, mtime) gets the same name."""
    tag = hashlib.sha256(f"{remote}\0{size}\0{mtime}".encode()).hexdigest()[:12]
    return f"{name}.{tag}.partial"


def _checked_name(name: str, where: str, seen: set[str]) -> str:
    if name in _BAD_NAMES or "/" in name or "\0" in name or name in seen:
        raise TransferFailed(f"the lease listed a bad or repeated name {name!r} in {where}; copy refused")
    seen.add(name)
    return name


def _real_dir(path: Path) -> None:
    """Make ``path`` a directory (never writing through a symbolic link)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        path.mkdir()
        return
    if not stat.S_ISDIR(info.st_mode):
        raise TransferFailed(
            f"{path} exists and is not a directory (or is a symbolic link); not written into"
        )


class Download:
    """One download (``get``): remote paths from ``sftp`` to local paths, all under ``progress``."""

    def __init__(self, sftp: asyncssh.SFTPClient, progress: Progress, lease: str) -> None:
        self.sftp, self.progress, self.lease = sftp, progress, lease
        self.limits = progress.limits
        self.block = _block(sftp, self.limits)

    async def run(self, sources: Sequence[str], target: Path, recursive: bool) -> None:
        into_dir = len(sources) > 1 or target.is_dir()
        if len(sources) > 1 and not target.is_dir():
            raise TransferFailed(f"{target} is not a directory (several sources need one)")
        for source in sources:
            attrs = await self._stat(source)
            local = target / posixpath.basename(source.rstrip("/") or "/") if into_dir else target
            if attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY:
                if not recursive:
                    raise TransferFailed(f"lease {self.lease}: {source} is a directory; copy it with -r")
                await self._tree(source, local)
            else:
                await self._file(source, local, attrs)

    async def _stat(self, path: str) -> asyncssh.SFTPAttrs:
        try:
            return await self.sftp.stat(path)
        except asyncssh.SFTPError as exc:
            raise TransferFailed(f"lease {self.lease}: {path}: {exc.reason}") from exc

    async def _tree(self, remote: str, local: Path) -> None:
        stack = [(remote, local)]
        while stack:
            remote_dir, local_dir = stack.pop()
            _real_dir(local_dir)
            self.progress.finished_one()
            seen: set[str] = set()
            async for entry in self.sftp.scandir(remote_dir):
                name = entry.filename if isinstance(entry.filename, str) else entry.filename.decode()
                if name in (".", ".."):
                    continue
                _checked_name(name, remote_dir, seen)
                remote_path, local_path = posixpath.join(remote_dir, name), local_dir / name
                kind = entry.attrs.type
                if kind == asyncssh.FILEXFER_TYPE_DIRECTORY:
                    stack.append((remote_path, local_path))
                elif kind == asyncssh.FILEXFER_TYPE_SYMLINK:
                    await self._link(remote_path, local_path)
                elif kind == asyncssh.FILEXFER_TYPE_REGULAR:
                    await self._file(remote_path, local_path, entry.attrs)
                # sockets, devices, fifos: nothing to copy

    async def _link(self, remote: str, local: Path) -> None:
        pointed = await self.sftp.readlink(remote)
        temporary = local.with_name(f"{local.name}.{secrets.token_hex(4)}.partial")
        os.symlink(pointed if isinstance(pointed, str) else pointed.decode(), temporary)
        os.replace(temporary, local)
        self.progress.finished_one()

    async def _file(self, remote: str, local: Path, attrs: asyncssh.SFTPAttrs) -> None:
        size = attrs.size or 0
        partial = local.with_name(partial_name(local.name, remote, size, attrs.mtime))
        for stale in local.parent.glob(f"{glob_escape(local.name)}.????????????.partial"):
            if stale != partial:
                stale.unlink(missing_ok=True)  # a partial of an older version of the file
        kept = partial.lstat().st_size if partial.exists() else 0
        free = shutil.disk_usage(local.parent).free
        if size - min(kept, size) > free:  # refused before a byte is written
            raise TransferFailed(
                f"lease {self.lease}: {remote} is {size} bytes; {local.parent} has only {free} free"
            )
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            start = os.fstat(fd).st_size
            if start > size:
                os.ftruncate(fd, 0)
                start = 0
            try:
                file = await self.sftp.open(remote, "rb", block_size=0)  # one request per read call
            except asyncssh.SFTPError as exc:
                raise TransferFailed(f"lease {self.lease}: {remote}: {exc.reason}") from exc
            await self._pull(file, fd, start, size, remote)  # on failure the session's end closes it
            await _quietly(file.close())
            os.fsync(fd)
        except OSError as exc:
            raise TransferFailed(
                f"lease {self.lease}: download of {remote} failed writing {partial}: {exc.strerror or exc}; "
                "the part copied is kept there, the same copy resumes it"
            ) from exc
        finally:
            os.close(fd)
        os.replace(partial, local)
        self.progress.finished_one()

    async def _pull(self, file: Any, fd: int, start: int, size: int, remote: str) -> None:
        """Remote bytes [start, size) into ``fd`` at the same offsets, pipelined; on failure the
        local file is cut back to its contiguous prefix, so a later run resumes without a hole."""
        contiguous, finished = start, {}
        pending: set[asyncio.Future[tuple[int, int, bytes]]] = set()
        offset = start
        try:
            while offset < size or pending:
                while offset < size and len(pending) < self.limits.depth:
                    count = min(self.block, size - offset)
                    pending.add(asyncio.ensure_future(_read(file, offset, count)))
                    offset += count
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    at, wanted, data = task.result()
                    data = data[:wanted]  # a peer sending more than asked gets no further
                    if not data:
                        raise TransferFailed(
                            f"lease {self.lease}: {remote} ended at {at} of {size} bytes while it was "
                            "copied (it changed); copy it again"
                        )
                    os.pwrite(fd, data, at)
                    self.progress.add(len(data))
                    if len(data) < wanted:
                        rest = _read(file, at + len(data), wanted - len(data))
                        pending.add(asyncio.ensure_future(rest))
                    finished[at] = at + len(data)
                while contiguous in finished:
                    contiguous = finished.pop(contiguous)
        except asyncssh.SFTPError as exc:
            raise TransferFailed(f"lease {self.lease}: download of {remote} failed: {exc.reason}") from exc
        finally:
            for task in pending:
                task.cancel()
            if contiguous < size:
                os.ftruncate(fd, contiguous)


class Upload:
    """One upload (``put``): local paths to remote paths on ``sftp``, all under ``progress``."""

    def __init__(self, sftp: asyncssh.SFTPClient, progress: Progress, lease: str) -> None:
        self.sftp, self.progress, self.lease = sftp, progress, lease
        self.limits = progress.limits
        self.block = _block(sftp, self.limits)

    async def run(self, sources: Sequence[Path], target: str, recursive: bool) -> None:
        into_dir = len(sources) > 1 or await self.sftp.isdir(target)
        for source in sources:
            remote = posixpath.join(target, source.name) if into_dir else target
            if source.is_dir() and not source.is_symlink():
                if not recursive:
                    raise TransferFailed(f"{source} is a directory; copy it with -r")
                await self._tree(source, remote)
            else:
                await self._entry(source, remote)

    async def _tree(self, local: Path, remote: str) -> None:
        stack = [(local, remote)]
        while stack:
            local_dir, remote_dir = stack.pop()
            if not await self.sftp.isdir(remote_dir):
                await self.sftp.mkdir(remote_dir)
            self.progress.finished_one()
            for entry in sorted(os.scandir(local_dir), key=lambda e: e.name):
                remote_path = posixpath.join(remote_dir, entry.name)
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), remote_path))
                else:
                    await self._entry(Path(entry.path), remote_path)

    async def _entry(self, local: Path, remote: str) -> None:
        if local.is_symlink():
            await self._replace_with(remote, lambda path: self.sftp.symlink(os.readlink(local), path))
        elif local.is_file():
            await self._replace_with(remote, lambda path: self._file(local, path))
        self.progress.finished_one()

    async def _replace_with(self, remote: str, make: Any) -> None:
        """``make(partial)`` on the lease, then the partial renamed over ``remote``."""
        partial = f"{remote}.{secrets.token_hex(6)}.partial"
        try:
            await make(partial)
            try:
                await self.sftp.posix_rename(partial, remote)
            except asyncssh.SFTPOpUnsupported:
                if await self.sftp.exists(remote):
                    await self.sftp.remove(remote)
                await self.sftp.rename(partial, remote)
        except asyncio.CancelledError:
            raise  # stalled (or the caller gave up): the peer would not answer a clean-up either
        except BaseException:
            await _quietly(self.sftp.remove(partial))
            raise

    async def _file(self, local: Path, remote: str) -> None:
        with local.open("rb") as source:
            size = os.fstat(source.fileno()).st_size
            file = await self.sftp.open(remote, "wb", block_size=0)  # one request per write call
            await self._push(file, source.fileno(), size, local)  # on failure the session's end closes it
            await file.close()

    async def _push(self, file: Any, fd: int, size: int, local: Path) -> None:
        pending: set[asyncio.Future[int]] = set()
        offset = 0
        try:
            while offset < size or pending:
                while offset < size and len(pending) < self.limits.depth:
                    data = os.pread(fd, min(self.block, size - offset), offset)
                    if not data:
                        raise TransferFailed(f"{local} shrank while it was copied; copy it again")
                    pending.add(asyncio.ensure_future(_write(file, data, offset)))
                    offset += len(data)
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    self.progress.add(task.result())
        finally:
            for task in pending:
                task.cancel()


def _block(sftp: asyncssh.SFTPClient, limits: TransferLimits) -> int:
    """The request size: ``limits.block``, or less where the server announces a smaller limit."""
    announced = [n for n in (sftp.limits.max_read_len, sftp.limits.max_write_len) if n]
    return min([limits.block, *announced])


async def _read(file: Any, offset: int, count: int) -> tuple[int, int, bytes]:
    return offset, count, await file.read(count, offset)


async def _write(file: Any, data: bytes, offset: int) -> int:
    await file.write(data, offset)
    return len(data)


async def _quietly(work: Awaitable[Any]) -> None:
    """``work`` (a close or a clean-up on the lease), given at most ``CANCEL_WAIT_S``: the peer may
    be the one that stalled."""
    try:
        await asyncio.wait_for(work, CANCEL_WAIT_S)
    except (asyncio.TimeoutError, OSError, asyncssh.Error, ValueError):
        pass


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[]" else c for c in name)


__all__ = ["Download", "Progress", "TransferLimits", "Upload", "partial_name", "watched"]
