"""Single files to and from a lease that offers no SFTP (a sandboxed embedded lease), through ``cat``.

Over the same pinned connection as everything else, with the same promises as the SFTP copies
(``compute.operator.transfer``), under the same stall bound (the caller wraps these in
``transfer.watched``; the bytes moved count as progress): an upload is written beside its name on
the lease and moved over it once complete; a download is written to ``NAME.partial`` and renamed
once complete, and removed when the copy fails (a ``cat`` cannot resume). Directories are refused:
copy a tar made with ``exec`` instead.

Deliberately not here: the SSH session (``run`` is ``shell.LeaseShell.run``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from compute.operator.errors import TransferFailed
from compute.operator.transfer import Progress

Runs = Callable[..., Awaitable[Any]]  # shell.LeaseShell.run


def _no_directory(lease: str, path: object) -> TransferFailed:
    return TransferFailed(
        f"lease {lease} offers no SFTP (a sandboxed embedded lease): copy single files, or a tar made "
        f"with exec, not the directory {path}"
    )


async def put_by_cat(run: Runs, lease: str, path: Path, target: str, progress: Progress) -> None:
    """``path`` into ``target`` on the lease (into it as a directory when it is one)."""
    if path.is_dir():
        raise _no_directory(lease, path)
    quoted, name = shlex.quote(target), shlex.quote(path.name)
    line = (
        f"if [ -d {quoted} ]; then t={quoted}/{name}; else t={quoted}; fi; "
        'p="$t.$$.partial"; cat > "$p" && mv -f "$p" "$t" || { rm -f "$p"; exit 1; }'
    )
    with path.open("rb") as handle:
        done = await run(line, input=handle, progress=progress)
    if not done.ok:
        raise TransferFailed(f"lease {lease}: upload of {path} failed: {done.stderr.strip()}")


async def get_by_cat(
    run: Runs, lease: str, source: str, target: Path, several: bool, progress: Progress
) -> None:
    """``source`` on the lease to ``target`` (into it when it is a directory or ``several``)."""
    into = target / Path(source).name if several or target.is_dir() else target
    partial = into.with_name(into.name + ".partial")
    try:
        with partial.open("wb") as handle:
            done = await run(f"exec cat {shlex.quote(source)}", stdout=handle, progress=progress)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if not done.ok:
        partial.unlink(missing_ok=True)
        raise TransferFailed(f"lease {lease}: download of {source} failed: {done.stderr.strip()}")
    partial.replace(into)


__all__ = ["get_by_cat", "put_by_cat"]
