"""The lease sandbox's launcher: run once per lease command, so it imports only what it uses.

``python -I -S sandbox_launch.py SPEC_JSON -- ARGV...`` (built by :func:`.sandbox.command`) enters
the sandbox described in :mod:`.sandbox` and execs ``ARGV``. Every SSH command and shell of a
sandboxed embedded lease starts here, so its start-up is on every command's path: no ``site``
(``-S``), no package import, no ``dataclasses``/``pathlib``, libc from the interpreter's own symbols
(``ctypes.util.find_library`` would run ``ldconfig`` each time). Stdlib only.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV = 2, 4
MS_REC, MS_PRIVATE = 16384, 1 << 18
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # the same number on every Linux architecture
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 0x4


def _libc() -> ctypes.CDLL:
    """libc's functions, through the symbols this interpreter already has loaded."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    encoded = [None if x is None else x.encode() for x in (source, target, fstype, data)]
    _check(
        libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]), f"mount {target}"
    )


def _closed_ancestors(path: str) -> list[str]:
    """Ancestors of ``path`` (not ``/``) that others cannot traverse (no ``o+x``)."""
    found, parent = [], os.path.dirname(path)
    while parent not in ("/", ""):
        try:
            if not os.stat(parent).st_mode & 0o001:
                found.append(parent)
        except OSError:
            pass
        parent = os.path.dirname(parent)
    return found


def _open_tree(libc: ctypes.CDLL, path: str) -> int:
    """A detached copy of the mounts at ``path`` (``open_tree``, Linux 5.2): it can be attached
    in the new mount namespace, where a plain bind from the old one is refused."""
    fd = libc.syscall(
        SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE
    )
    if fd < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"open_tree {path}: {os.strerror(errno)}")
    return int(fd)


def _attach(libc: ctypes.CDLL, fd: int, target: str) -> None:
    result = libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH)
    _check(0 if result == 0 else -1, f"move_mount {target}")
    os.close(fd)


def enter(home: str, uid: int, gid: int, hide: list[str], keep: list[str]) -> None:
    """Steps 1-4 of :mod:`.sandbox`'s docstring, in this (single-threaded, fresh) process."""
    libc = _libc()
    home = os.path.realpath(home)
    kept = [os.path.realpath(p) for p in keep if os.path.exists(p)]
    trees = [(path, _open_tree(libc, path)) for path in sorted(set(kept), key=len)]
    home_tree = _open_tree(libc, home)
    # a directory on the way to a kept path that others may not cross is covered too (and the
    # path made again inside the cover): the lease reaches what it keeps and nothing beside it
    closed = {d for p in [home, *kept] for d in _closed_ancestors(p)}
    _check(libc.unshare(CLONE_NEWNS), "unshare")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing below leaks back out
    for path in sorted({os.path.realpath(p) for p in hide} | closed, key=len):
        if os.path.isdir(path):
            _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path, tree in trees:
        os.makedirs(path, exist_ok=True)
        _attach(libc, tree, path)
    os.makedirs(home, exist_ok=True)
    _attach(libc, home_tree, home)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)  # unprivileged from here: the mounts above cannot be undone
    os.chdir(home)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: sandbox_launch SPEC_JSON -- ARGV...", file=sys.stderr)
        return 2
    try:
        spec = json.loads(argv[0])
        enter(spec["home"], int(spec["uid"]), int(spec["gid"]), list(spec["hide"]), list(spec["keep"]))
    except (ValueError, KeyError, TypeError) as exc:
        print(f"lease sandbox: a bad spec: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"lease sandbox: {exc}", file=sys.stderr)
        return 126
    os.execve(argv[2], argv[2:], dict(os.environ))
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
