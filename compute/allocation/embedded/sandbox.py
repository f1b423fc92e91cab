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

``python -I -S .../sandbox_launch.py SPEC_JSON -- ARGV...`` is what the backend runs (:func:`command`;
the launcher is its own lean script, started once per lease command); :func:`probe` runs a check
through it at the miner's start. What it deliberately does not do: limit
CPU, memory or network (Docker leases do), or work without root (the miner refuses the embedded
backend off the local demo then).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import sandbox_launch

UID_BASE, UID_SPAN = 200_000, 60_000  # per-lease uids (no passwd entry needed)


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


SCRIPT = os.path.abspath(sandbox_launch.__file__)


def command(spec: Spec, argv: list[str]) -> list[str]:
    """The argv that runs ``argv`` inside the sandbox of ``spec``."""
    return [sys.executable, "-I", "-S", SCRIPT, spec.to_json(), "--", *argv]


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


__all__ = [
    "SCRIPT",
    "UID_BASE",
    "SandboxPaths",
    "Spec",
    "available",
    "command",
    "lease_uid",
    "probe",
]
