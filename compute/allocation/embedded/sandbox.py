"""The embedded backend's lease sandbox: a lease command that cannot read the miner's keys.

Without it an embedded lease's shell runs as the miner's own user and can read the miner's wallet
(its hotkey mnemonic), the lease database and every other lease's SSH host key. With it (the miner
runs as root), each command is started through this launcher, which, before the command runs:

1. opens the lease's home and the paths to keep (the Python the leases use, the operator's
   ``path_prefix``) while they are still visible;
2. enters a mount namespace of its own and mounts an empty ``tmpfs`` over each hidden path (the
   miner's home directory, its wallet directory and its data directory, wherever they are);
3. attaches the kept paths back at their places and the lease's home (``open_tree`` copies made
   before step 2, ``move_mount`` after: Linux 5.2 or later);
4. drops to the lease's own unprivileged uid/gid (one per lease, without supplementary groups),
   then runs ``/bin/sh``.

An unprivileged process cannot unmount what hides the keys, cannot read root's files, and does not
share a uid with the miner or another lease (no signals, no ``ptrace``, no ``/proc/<pid>/mem``).

``python -I .../sandbox.py SPEC_JSON -- ARGV...`` is what the backend runs (as a script, stdlib only:
no package import per command); :func:`probe` runs a check through it at the miner's start. What it deliberately does not do: limit
CPU, memory or network (Docker leases do), or work without root (the miner refuses the embedded
backend off the local demo then).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV = 2, 4
MS_REC, MS_PRIVATE = 16384, 1 << 18
UID_BASE, UID_SPAN = 200_000, 60_000  # per-lease uids (no passwd entry needed)
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # the same number on every Linux architecture
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 0x4


@dataclass(frozen=True)
class Spec:
    home: str  # the lease's home: bound back read-write
    uid: int
    gid: int
    hide: tuple[str, ...]  # covered by an empty tmpfs
    keep: tuple[str, ...] = field(default_factory=tuple)  # attached back (under a hidden path)

    def to_json(self) -> str:
        return json.dumps(asdict(self))


@dataclass(frozen=True)
class SandboxPaths:
    """What sandboxed lease commands must not see (``hide``) and what they still need (``keep``:
    the interpreter and the operator's ``path_prefix``, bound back read-only)."""

    hide: tuple[str, ...]
    keep: tuple[str, ...] = ()

    @classmethod
    def for_miner(
        cls, wallet_path: str | Path, data_dir: str | Path, keep: Sequence[str] = ()
    ) -> SandboxPaths:
        """The miner's home, wallets and data hidden; this Python (and ``keep``) kept."""
        interpreter = {
            os.path.realpath(sys.base_prefix),
            os.path.realpath(sys.prefix),
            os.path.dirname(os.path.realpath(sys.executable)),
            os.path.dirname(SCRIPT),
        }
        hide = {
            os.path.expanduser("~"),
            os.path.expanduser(str(wallet_path)),
            os.path.expanduser(str(data_dir)),
        }
        return cls(
            tuple(sorted(p for p in hide if p not in ("/", ""))), tuple(sorted(interpreter | set(keep)))
        )


def lease_uid(lease_id: str, taken: set[int]) -> int:
    """A uid for the lease from its id, unlike those ``taken`` by other live leases."""
    uid = UID_BASE + int(lease_id[:8], 16) % UID_SPAN
    while uid in taken:
        uid = UID_BASE + (uid - UID_BASE + 1) % UID_SPAN
    return uid


SCRIPT = os.path.abspath(__file__)


def command(spec: Spec, argv: list[str]) -> list[str]:
    """The argv that runs ``argv`` inside the sandbox of ``spec``."""
    return [sys.executable, "-I", SCRIPT, spec.to_json(), "--", *argv]


def probe(hide: tuple[str, ...], keep: tuple[str, ...], secrets: list[str], work: str) -> list[str]:
    """The ``secrets`` a sandboxed command can still read (empty: the sandbox holds). Runs one
    command as an unused lease uid with ``work`` as its home."""
    import subprocess

    os.makedirs(work, exist_ok=True)
    uid = UID_BASE + UID_SPAN  # outside the leases' range: never a live lease's
    os.chown(work, uid, uid)
    tests = " ".join(f"test -r '{path}' && echo '{path}';" for path in secrets)
    done = subprocess.run(
        command(Spec(work, uid, uid, hide, keep), ["/bin/sh", "-c", f"{tests} echo sandbox-ok"]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if "sandbox-ok" not in done.stdout:
        raise OSError(f"the lease sandbox does not start: {(done.stderr or done.stdout).strip()[-300:]}")
    return [line for line in done.stdout.splitlines() if line in secrets]


def available() -> bool:
    """Whether this process could start sandboxed leases (root, a mount namespace, /bin/sh)."""
    return os.geteuid() == 0 and os.path.exists("/bin/sh") and sys.platform.startswith("linux")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


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


def enter(spec: Spec) -> None:
    """Steps 1-4 of the module docstring, in this (single-threaded, fresh) process."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    home = os.path.realpath(spec.home)
    kept = [os.path.realpath(p) for p in spec.keep if os.path.exists(p)]
    trees = [(path, _open_tree(libc, path)) for path in sorted(set(kept), key=len)]
    home_tree = _open_tree(libc, home)
    # a directory on the way to a kept path that others may not cross is covered too (and the
    # path made again inside the cover): the lease reaches what it keeps and nothing beside it
    closed = {d for p in [home, *kept] for d in _closed_ancestors(p)}
    _check(libc.unshare(CLONE_NEWNS), "unshare")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing below leaks back out
    for path in sorted({os.path.realpath(p) for p in spec.hide} | closed, key=len):
        if os.path.isdir(path):
            _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path, tree in trees:
        os.makedirs(path, exist_ok=True)
        _attach(libc, tree, path)
    os.makedirs(home, exist_ok=True)
    _attach(libc, home_tree, home)
    os.setgroups([])
    os.setgid(spec.gid)
    os.setuid(spec.uid)  # unprivileged from here: the mounts above cannot be undone
    os.chdir(home)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: sandbox SPEC_JSON -- ARGV...", file=sys.stderr)
        return 2
    data = json.loads(argv[0])
    spec = Spec(data["home"], data["uid"], data["gid"], tuple(data["hide"]), tuple(data["keep"]))
    try:
        enter(spec)
    except OSError as exc:
        print(f"lease sandbox: {exc}", file=sys.stderr)
        return 126
    os.execve(argv[2], argv[2:], dict(os.environ))
    return 127  # not reached


__all__ = [
    "SCRIPT",
    "UID_BASE",
    "SandboxPaths",
    "Spec",
    "available",
    "command",
    "enter",
    "lease_uid",
    "main",
    "probe",
]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
