"""SSH into a lease with its pinned host key: run commands, copy files, wait until it answers.

Every connection uses the lease's own known_hosts file (written from the host key the miner
signed) and nothing else, so a machine in the middle with another host key is refused before any
byte of a command or a file leaves this process. The client key is the lease's key file from the
book; a renter who passed only a public key (``--ssh-key id.pub`` without the private half beside
it) is served by the default keys and agent of asyncssh, as ``ssh`` would.

- ``LeaseAccess.of(entry)``: how to reach a lease in the book (refused unless it is active).
- ``LeaseShell``: one asyncssh connection; ``run`` (stdout/stderr captured up to a cap or streamed
  to a sink), ``put``/``get`` over SFTP (Docker's ``internal-sftp``, the demo's embedded leases
  rooted at their home; ``compute.operator.transfer``: stall-bounded, complete files only under
  their names, downloads resumable); a lease without SFTP (a sandboxed embedded lease) gets single
  files streamed through ``cat`` instead, under the same stall bound.

- ``wait_for_ssh``: retries until a login runs ``true``; connection failures are retried, a
  host-key mismatch or a refused key is not (both are answers, not delays).
- ``ssh_argv``: the system OpenSSH command line for an interactive shell (``register.py ssh``).

Bounds, whatever the lease does: a connection is made within ``CONNECT_TIMEOUT_S`` (+5 s), a
command's session opens within ``OPEN_TIMEOUT_S``, its exit status follows the end of its output
within ``EXIT_WAIT_S``, a copy fails once it moves less than 64 KiB in ``idle_s`` (30 s), and a
connection whose peer stops answering keep-alives is dropped after ``KEEPALIVE_S`` x 3. A command
itself runs as long as it runs, unless ``timeout`` is given: a silent command and a silent lease
look alike. Captured output is capped (``MAX_CAPTURE_BYTES`` per stream, the rest counted and
dropped: ``RunResult.truncated``).

Deliberately not here: choosing or renting leases (``service``), printing (``cli``).
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import asyncssh

from compute.operator.book import BookEntry
from compute.operator.capture import Capture
from compute.operator.catcopy import get_by_cat, put_by_cat
from compute.operator.errors import (
    CommandTimeout,
    HostKeyMismatch,
    LeaseExpired,
    LeaseNotReady,
    SshAuthFailed,
    SshUnreachable,
    TransferFailed,
)
from compute.operator.transfer import Download, Progress, TransferLimits, Upload, watched

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 20.0
OPEN_TIMEOUT_S = 20.0  # a command's session (channel open, exec request) must start within this
EXIT_WAIT_S = 30.0  # after a command's output ended, its exit status must come within this
KEEPALIVE_S = 30.0  # a peer that answers no keep-alive for 3 of these is gone
MAX_CAPTURE_BYTES = 64 * 1024 * 1024  # per stream; more goes to a sink, not to memory
_READ_CHUNK = 65536
DEFAULT_LIMITS = TransferLimits()


class _NoSftp(Exception):
    """The lease has no SFTP subsystem (the embedded backend's sandboxed leases)."""


class Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


@dataclass(frozen=True)
class LeaseAccess:
    """Everything needed to open one lease's SSH: address, user, pinned host key file, client key."""

    lease_id: str
    host: str
    port: int
    username: str
    known_hosts: Path
    private_key: Path | None  # None: the default keys and agent (the renter's own key)

    @classmethod
    def of(cls, entry: BookEntry, now: float | None = None) -> LeaseAccess:
        if entry.state == "expired" or (entry.state == "active" and entry.expires_at <= (now or time.time())):
            ended = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.expires_at))
            raise LeaseExpired(
                f"lease {entry.lease_id} expired at {ended} (its term ran out: the miner ended it); "
                "rent a new one, and extend it before its term ends next time"
            )
        if entry.state != "active":
            raise LeaseNotReady(f"lease {entry.lease_id} is {entry.state}; only an active lease has SSH")
        if not entry.ssh_host or not entry.ssh_port or not entry.known_hosts_path:
            raise LeaseNotReady(
                f"lease {entry.lease_id} has no SSH access in the book yet; run `status {entry.lease_id[:8]}`"
            )
        known = Path(entry.known_hosts_path)
        if not known.is_file():
            raise LeaseNotReady(
                f"the pinned host key of lease {entry.lease_id} ({known}) is missing; "
                f"run `status {entry.lease_id[:8]}` to pin it again from the miner's signed answer"
            )
        private = Path(entry.private_key_path) if entry.private_key_path else None
        return cls(
            entry.lease_id, entry.ssh_host, entry.ssh_port, entry.ssh_username or "root", known, private
        )

    def target(self) -> str:
        return f"{self.username}@{self.host}:{self.port}"


@dataclass(frozen=True)
class RunResult:
    """One command's outcome: its exit status and what it printed (captured part, bytes)."""

    command: str
    exit_status: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    elapsed_s: float
    truncated: bool = False  # output beyond the capture cap was dropped

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", errors="replace")


def _classify(access: LeaseAccess, exc: BaseException) -> Exception:
    """The operator error for a failed connect (one sentence a renter can act on)."""
    where = f"lease {access.lease_id} at {access.target()}"
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return HostKeyMismatch(
            f"{where} did not present the host key the miner signed (pinned in {access.known_hosts}); "
            "refusing to connect: someone may be in the middle, or the lease was replaced"
        )
    if isinstance(exc, asyncssh.PermissionDenied):
        key = access.private_key or "your default SSH keys"
        return SshAuthFailed(f"{where} refused the key {key}; was it exchanged (exchange-key)?")
    if isinstance(exc, asyncio.TimeoutError):
        return SshUnreachable(f"{where} did not answer SSH within {CONNECT_TIMEOUT_S:.0f} s")
    return SshUnreachable(f"{where} is not reachable over SSH: {exc or type(exc).__name__}")


class LeaseShell:
    """One SSH connection to a lease (``async with LeaseShell.open(access) as shell``)."""

    def __init__(self, access: LeaseAccess, conn: asyncssh.SSHClientConnection) -> None:
        self.access = access
        self._conn = conn

    @classmethod
    async def open(cls, access: LeaseAccess, timeout: float = CONNECT_TIMEOUT_S) -> LeaseShell:
        keys: list[str] = [str(access.private_key)] if access.private_key is not None else []
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    access.host,
                    access.port,
                    username=access.username,
                    known_hosts=str(access.known_hosts),
                    client_keys=keys or (),  # (): the default keys, as ssh would
                    agent_path=None if keys else (),  # the lease's own key only, like IdentitiesOnly
                    connect_timeout=timeout,
                    keepalive_interval=KEEPALIVE_S,
                    keepalive_count_max=3,
                    config=[],  # never read ~/.ssh/config: it could redirect the pinned address
                ),
                timeout + 5,
            )
        except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
            raise _classify(access, exc) from exc
        return cls(access, conn)

    async def __aenter__(self) -> LeaseShell:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._conn.is_closed()

    async def close(self) -> None:
        self._conn.close()
        try:
            await asyncio.wait_for(self._conn.wait_closed(), 5)
        except (asyncio.TimeoutError, OSError, asyncssh.Error):
            pass

    async def process(self, command: str) -> asyncssh.SSHClientProcess:
        """A raw session running ``command`` (bytes both ways), for a caller that pumps it itself."""
        where = f"lease {self.access.lease_id}"
        try:
            return await asyncio.wait_for(self._conn.create_process(command, encoding=None), OPEN_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise SshUnreachable(
                f"{where}: the session for {command!r} did not open within {OPEN_TIMEOUT_S:g} s"
            ) from None
        except (OSError, asyncssh.Error) as exc:
            raise SshUnreachable(f"{where}: cannot start {command!r}: {exc}") from exc

    async def run(
        self,
        command: str,
        *,
        input: bytes | str | BinaryIO | None = None,
        timeout: float | None = None,
        stdout: Sink | None = None,
        stderr: Sink | None = None,
        max_capture: int = MAX_CAPTURE_BYTES,
        progress: Progress | None = None,
    ) -> RunResult:
        """Run ``command`` (a shell line) on the lease; stream to ``stdout``/``stderr`` if given,
        else capture up to ``max_capture`` bytes each (the rest is counted and dropped:
        ``truncated``). Raises ``CommandTimeout`` after ``timeout`` (the remote command is ended
        with the session); ``progress`` counts the bytes moved each way (a copy through ``cat``)."""
        started = time.monotonic()
        where = f"lease {self.access.lease_id}"
        process = await self.process(command)
        out, err = Capture(max_capture), Capture(max_capture)  # used only without a sink

        async def pump(reader: asyncssh.SSHReader, sink: Sink) -> None:
            while chunk := await reader.read(_READ_CHUNK):
                sink.write(chunk)
                if progress is not None:
                    progress.add(len(chunk))

        async def feed() -> None:
            if isinstance(input, (bytes, str)):
                process.stdin.write(input.encode() if isinstance(input, str) else input)
            elif input is not None:  # a binary file: streamed, never read whole into memory
                while chunk := input.read(_READ_CHUNK):
                    process.stdin.write(chunk)
                    await process.stdin.drain()
                    if progress is not None:
                        progress.add(len(chunk))
            process.stdin.write_eof()

        work = asyncio.gather(
            feed(), pump(process.stdout, stdout or out), pump(process.stderr, stderr or err)
        )
        # wait_for cancels it on a Ctrl-C and never reads its CancelledError: read it here, or
        # asyncio logs "_GatheringFuture exception was never retrieved" under the "interrupted" line
        work.add_done_callback(_retrieved)
        try:
            await asyncio.wait_for(work, timeout)
        except asyncio.TimeoutError:
            process.close()
            raise CommandTimeout(
                f"{where}: {command!r} did not finish within {timeout:g} s; its session was closed"
            ) from None
        except (OSError, asyncssh.Error) as exc:
            process.close()
            raise SshUnreachable(f"{where}: connection lost during {command!r}: {exc}") from exc
        except BaseException:
            process.close()
            raise
        try:
            completed = await asyncio.wait_for(process.wait(), EXIT_WAIT_S)
        except asyncio.TimeoutError:
            process.close()
            raise SshUnreachable(
                f"{where}: {command!r} closed its output but its exit status did not come within "
                f"{EXIT_WAIT_S:g} s"
            ) from None
        except (OSError, asyncssh.Error) as exc:
            raise SshUnreachable(f"{where}: connection lost during {command!r}: {exc}") from exc
        status = completed.exit_status
        if status is None:  # killed by a signal: report as shells do
            status = 128 + _signal_number(completed.exit_signal)
        return RunResult(
            command,
            status,
            out.value(),
            err.value(),
            time.monotonic() - started,
            out.truncated or err.truncated,
        )

    async def put(
        self,
        sources: Sequence[str | Path],
        target: str,
        recursive: bool = False,
        limits: TransferLimits = DEFAULT_LIMITS,
    ) -> None:
        """Copy local ``sources`` to ``target`` on the lease (a directory when several); each file
        appears under its name only once complete. ``TransferStalled`` once the copy moves less
        than ``limits.min_bytes`` in ``limits.idle_s``."""
        paths = [Path(source).expanduser() for source in sources]
        for path in paths:
            if not path.exists() and not path.is_symlink():
                raise TransferFailed(f"{path}: no such local file or directory")
            if path.is_dir() and not recursive:
                raise TransferFailed(f"{path} is a directory; copy it with -r")
        progress = Progress(limits)
        try:
            await self._sftp(
                "upload",
                progress,
                lambda sftp: Upload(sftp, progress, self.access.lease_id).run(paths, target, recursive),
            )
        except _NoSftp:
            for path in paths:
                work = put_by_cat(self.run, self.access.lease_id, path, target, progress)
                await watched(work, progress, self._what("upload", path))

    async def get(
        self,
        sources: Sequence[str],
        target: str | Path,
        recursive: bool = False,
        limits: TransferLimits = DEFAULT_LIMITS,
    ) -> None:
        """Copy ``sources`` from the lease to the local ``target`` (a directory when several); each
        file is written as ``NAME.<tag>.partial`` and renamed to ``NAME`` only once complete (a
        failed copy keeps the part; the same copy resumes it). ``TransferStalled`` once the copy
        moves less than ``limits.min_bytes`` in ``limits.idle_s``."""
        local = Path(target).expanduser()
        progress = Progress(limits)
        try:
            await self._sftp(
                "download",
                progress,
                lambda sftp: Download(sftp, progress, self.access.lease_id).run(sources, local, recursive),
            )
        except _NoSftp:
            if recursive:
                raise TransferFailed(
                    f"lease {self.access.lease_id} offers no SFTP (a sandboxed embedded lease): copy single "
                    "files, or a tar made with exec"
                ) from None
            for source in sources:
                work = get_by_cat(self.run, self.access.lease_id, source, local, len(sources) > 1, progress)
                await watched(work, progress, self._what("download", source))

    def _what(self, direction: str, path: object) -> str:
        return f"lease {self.access.lease_id}: {direction} of {path}"

    async def _sftp(self, what: str, progress: Progress, action: Callable[[Any], Awaitable[None]]) -> None:
        """``action(sftp)`` on a fresh SFTP session, all of it under the stall bound."""

        async def session() -> None:
            sftp = await self._conn.start_sftp_client()
            try:
                await action(sftp)
            finally:
                sftp.exit()  # closes the channel without waiting for a peer that may have stalled

        try:
            await watched(session(), progress, f"lease {self.access.lease_id}: {what}")
        except asyncssh.ChannelOpenError as exc:
            raise _NoSftp(str(exc)) from exc
        except asyncssh.SFTPError as exc:
            raise TransferFailed(f"lease {self.access.lease_id}: {what} failed: {exc.reason}") from exc
        except OSError as exc:
            raise TransferFailed(f"lease {self.access.lease_id}: {what} failed: {exc}") from exc
        except asyncssh.Error as exc:
            raise SshUnreachable(f"lease {self.access.lease_id}: {what} failed: {exc}") from exc


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _signal_number(name: str | tuple | None) -> int:
    import signal

    text = name[0] if isinstance(name, tuple) else name
    try:
        return int(signal.Signals[f"SIG{text}"]) if text else 0
    except KeyError:
        return 0


async def wait_for_ssh(access: LeaseAccess, timeout: float = 120.0, interval: float = 1.0) -> float:
    """Seconds until a login on the lease ran ``true``; ``SshUnreachable`` at ``timeout``.

    Only connection failures are retried: a wrong host key or a refused key raise at once."""
    started = time.monotonic()
    deadline = started + timeout
    last: Exception | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SshUnreachable(
                f"lease {access.lease_id} at {access.target()} did not accept SSH within {timeout:g} s"
                + (f" (last: {last})" if last else "")
            )
        try:
            async with await LeaseShell.open(access, timeout=min(CONNECT_TIMEOUT_S, max(1.0, left))) as shell:
                result = await shell.run("true", timeout=max(1.0, min(30.0, left)))
            if result.ok:
                return time.monotonic() - started
            last = SshUnreachable(f"`true` exited {result.exit_status}")
        except (SshUnreachable, CommandTimeout) as exc:
            last = exc
        logger.debug("lease=%s not ready over SSH: %s", access.lease_id, last)
        await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def ssh_argv(access: LeaseAccess, command: Sequence[str] = (), tty: bool | None = None) -> list[str]:
    """The system ``ssh`` argv for the lease: pinned known_hosts, strict checking, no config file."""
    argv = ["ssh", "-F", "/dev/null"]
    if access.private_key is not None:
        argv += ["-i", str(access.private_key), "-o", "IdentitiesOnly=yes"]
    argv += [
        "-p",
        str(access.port),
        "-o",
        f"UserKnownHostsFile={access.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT_S:.0f}",
        "-o",
        f"ServerAliveInterval={KEEPALIVE_S:.0f}",  # a peer gone silent is dropped, as by exec and cp
        "-o",
        "ServerAliveCountMax=3",
    ]
    if tty is True:
        argv.append("-t")
    elif tty is False:
        argv.append("-T")
    argv.append(f"{access.username}@{access.host}")
    if command:
        argv += ["--", " ".join(shlex.quote(part) for part in command) if len(command) > 1 else command[0]]
    return argv


__all__ = ["LeaseAccess", "LeaseShell", "RunResult", "Sink", "TransferLimits", "ssh_argv", "wait_for_ssh"]
