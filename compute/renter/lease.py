"""One rented machine in the async SDK: wait for SSH, run commands, copy files, extend, release.

An ``AsyncLease`` wraps the lease-book entry the operator client keeps (who holds it, until when,
the pinned host key) and one cached SSH connection (``compute.operator.LeaseShell``: pinned host
key, the lease's own key). ``release`` is idempotent and closes that connection; ``async with``
releases on the way out, whatever happened inside. Nothing here prints.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from compute.operator import (
    BookEntry,
    LeaseAccess,
    LeaseShell,
    MinerRef,
    Operator,
    Refused,
    RunResult,
    SshUnreachable,
    wait_for_ssh,
)
from compute.operator.errors import OutputTruncated, TransferStalled
from compute.operator.shell import MAX_CAPTURE_BYTES, Sink
from compute.operator.transfer import TransferLimits
from compute.protocol import LeaseIdle
from compute.renter.errors import CommandFailed, ConfigError, ReleaseFailed
from compute.renter.terms import term_seconds

logger = logging.getLogger(__name__)

RELEASE_TRIES = (0.0, 1.0, 3.0)  # seconds before each attempt
IDLE_TIMEOUT_S = TransferLimits.idle_s  # a copy moving less than 64 KiB in this long fails


def _limits(idle_timeout: float) -> TransferLimits:
    try:
        return TransferLimits(idle_s=idle_timeout)
    except ValueError as exc:
        raise ConfigError(f"idle_timeout: {exc}") from None


class OperatorHolder(Protocol):
    """What a lease needs of its renter (``AsyncRenter``): the operator client, read at each call, so
    a lease of a closed renter says so instead of using a closed client."""

    @property
    def operator(self) -> Operator: ...


class AsyncLease:
    """A lease of this renter (``await renter.allocate(...)`` or ``async with renter.rent(...)``)."""

    def __init__(self, renter: OperatorHolder, entry: BookEntry) -> None:
        self._renter = renter
        self.entry = entry
        self._shell: LeaseShell | None = None
        self._released = entry.state != "active"

    def __repr__(self) -> str:
        return f"<AsyncLease {self.id} {self.state} {self.gpus} until {self.expires_at:.0f}>"

    # ---------------------------------------------------------------- what it is

    @property
    def id(self) -> str:
        return self.entry.lease_id

    @property
    def state(self) -> str:
        return self.entry.state

    @property
    def gpus(self) -> str:
        return self.entry.gpu_summary

    @property
    def verified(self) -> bool:
        """Whether a validator proved this machine's GPUs (PoG) when it was chosen."""
        return self.entry.verified

    @property
    def expires_at(self) -> float:
        return self.entry.expires_at

    @property
    def miner(self) -> MinerRef:
        return MinerRef(self.entry.miner_hotkey, self.entry.endpoint, self.entry.miner_uid)

    @property
    def ports(self) -> dict[int, int]:
        """Lease port -> public port of the extra ports asked for."""
        return dict(self.entry.ports)

    @property
    def idle(self) -> LeaseIdle | None:
        """The miner's idle watch, for a lease with an idle stop (as of the last answer)."""
        return self._renter.operator.lease_idle.get(self.id)

    @property
    def price_per_hour(self) -> float | None:
        """USD per hour the miner signed when it rented the lease (None: it named no price)."""
        return self.entry.price_per_hour

    def spent(self, now: float | None = None) -> float | None:
        """USD spent so far at its price: from its start to now, or to its end."""
        return self.entry.spent(time.time() if now is None else now)

    def ssh_command(self) -> str | None:
        """The ready-to-paste ``ssh`` line (pinned host key); None once the lease ended."""
        return self._renter.operator.ssh_command(self.entry)

    # ---------------------------------------------------------------- reaching in

    async def wait_ssh(self, timeout: float = 180.0) -> float:
        """Seconds until a login ran ``true``; ``SshUnreachable`` after ``timeout``."""
        return await wait_for_ssh(LeaseAccess.of(self.entry), timeout)

    async def _connected(self) -> LeaseShell:
        if self._shell is None or self._shell.closed:
            self._shell = await LeaseShell.open(LeaseAccess.of(self.entry))
        return self._shell

    async def run(
        self,
        command: str | Sequence[str],
        *,
        check: bool = False,
        timeout: float | None = None,
        input: bytes | str | None = None,
        stdout: Sink | None = None,
        stderr: Sink | None = None,
        max_output: int = MAX_CAPTURE_BYTES,
    ) -> RunResult:
        """Run ``command`` (a shell line, or a list of words quoted one by one) on the lease.

        Output is captured (``result.stdout``/``stderr``, ``max_output`` bytes each, 64 MiB by
        default) unless a sink with a ``write(bytes)`` method is given; a command that prints more
        runs to its end and raises ``OutputTruncated`` (its ``result`` holds the kept part).
        ``check=True`` raises ``CommandFailed`` on a non-zero exit; ``timeout`` raises
        ``CommandTimeout`` and ends the command with its session."""
        line = command if isinstance(command, str) else " ".join(shlex.quote(word) for word in command)
        shell = await self._connected()
        try:
            result = await shell.run(
                line, input=input, timeout=timeout, stdout=stdout, stderr=stderr, max_capture=max_output
            )
        except SshUnreachable:
            await self._drop_shell()
            raise
        if result.truncated:
            raise OutputTruncated(
                f"lease {self.id}: {line!r} printed more than {max_output} bytes on a stream; the first "
                f"{max_output} are in .result (exit status {result.exit_status}); pass stdout=/stderr= "
                "sinks to stream all of it",
                result,
            )
        if check and not result.ok:
            raise CommandFailed(result, self.id)
        return result

    async def put(
        self,
        local: str | Path | Sequence[str | Path],
        remote: str = ".",
        recursive: bool | None = None,
        *,
        idle_timeout: float = IDLE_TIMEOUT_S,
    ) -> None:
        """Copy local files (or directories: ``recursive`` defaults to True for one) to the lease.
        ``TransferStalled`` when the copy moves less than 64 KiB in ``idle_timeout`` seconds."""
        sources = [local] if isinstance(local, (str, Path)) else list(local)
        if recursive is None:
            recursive = any(Path(s).expanduser().is_dir() for s in sources)
        limits = _limits(idle_timeout)
        await self._copy(lambda shell: shell.put(sources, remote, recursive=recursive, limits=limits))

    async def get(
        self,
        remote: str | Sequence[str],
        local: str | Path = ".",
        recursive: bool = False,
        *,
        idle_timeout: float = IDLE_TIMEOUT_S,
    ) -> None:
        """Copy files (``recursive=True`` for directories) from the lease to ``local``. A file shows
        under its name only once complete; a failed copy keeps ``NAME.<tag>.partial`` and the same
        ``get`` resumes it. ``TransferStalled`` when the copy moves less than 64 KiB in
        ``idle_timeout`` seconds."""
        sources = [remote] if isinstance(remote, str) else list(remote)
        limits = _limits(idle_timeout)
        await self._copy(lambda shell: shell.get(sources, local, recursive=recursive, limits=limits))

    async def _copy(self, action: Callable[[LeaseShell], Awaitable[None]]) -> None:
        shell = await self._connected()
        try:
            await action(shell)
        except (SshUnreachable, TransferStalled):
            await self._drop_shell()  # a stalled session is not used again: the next call reconnects
            raise

    # ---------------------------------------------------------------- the lease itself

    async def refresh(self) -> AsyncLease:
        """Ask the miner for the lease's state now (and re-pin its host key from its signed answer)."""
        self.entry = await self._renter.operator.status(self.id, self.miner)
        if self.entry.state != "active":
            self._released = True
            await self._drop_shell()
        return self

    async def extend(
        self, ttl: str | float | None = None, *, until: str | float | datetime | None = None
    ) -> AsyncLease:
        """Add ``ttl`` (``"2h"``, seconds) to the term, or extend it up to ``until``."""
        seconds = term_seconds(ttl, until, base=self.entry.expires_at, default=None)
        self.entry = await self._renter.operator.extend(self.id, seconds, self.miner)
        return self

    async def release(self) -> None:
        """End the lease now. Idempotent; retried a few times; ``ReleaseFailed`` when the miner never
        confirmed it (the lease then still ends by itself at its term)."""
        if self._released:
            return
        await self._drop_shell()
        last: Exception | None = None
        for pause in RELEASE_TRIES:
            await asyncio.sleep(pause)
            try:
                await self._renter.operator.deallocate(self.id, self.miner)
            except Refused as exc:
                if exc.code in ("lease_not_found", "lease_expired"):
                    break  # already over: nothing left to release
                last = exc
                logger.warning("release of lease=%s failed (%s); retrying", self.id, exc.message)
                continue
            break
        else:
            ends = datetime.fromtimestamp(self.expires_at).isoformat(timespec="minutes")
            raise ReleaseFailed(
                f"lease {self.id} on miner {self.miner.label()} was not released ({last}); "
                f"it ends by itself at its term, {ends}"
            ) from last
        self._released = True
        self.entry = self.entry.with_changes(state="released")
        logger.info("released lease=%s", self.id)

    async def _drop_shell(self) -> None:
        if self._shell is not None:
            shell, self._shell = self._shell, None
            await shell.close()

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(self, kind: object, error: object, trace: object) -> None:
        if error is None:
            await asyncio.shield(self.release())
            return
        try:  # the block failed: release, but never hide its error behind a failed release
            await asyncio.shield(self.release())
        except ReleaseFailed as exc:
            logger.error("%s", exc.message)


__all__ = ["AsyncLease"]
