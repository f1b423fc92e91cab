"""Embedded rental backend: one in-process asyncssh server per lease, commands run as subprocesses.

For development, CI and the local demo (no Docker, no GPU isolation). Each lease gets:
- a listener on a free port of the configured range, bound with its own ed25519 host key
  (persisted 0600 under ``data_dir/embedded/<lease>/`` so a restarted miner serves the same
  key and, when free, the same port — renters' pins stay valid);
- key-only authentication as user ``lease`` with exactly the lease's public key (swapped
  atomically by ``set_authorized_key``; sessions opened with the old key are closed);
- every exec/shell request run as ``/bin/sh -c <command>`` (or ``/bin/sh`` reading stdin) in
  the lease's home directory with a minimal environment, in its own process group that is
  killed when the session closes or the lease stops; SFTP rooted at the home directory. A
  session that asks for a terminal (``ssh`` from a terminal, ``ssh -t``) runs on a real PTY
  (:mod:`.terminal`: window size and its changes, Ctrl-C as SIGINT, ``bash`` where installed).
  ``CUDA_VISIBLE_DEVICES`` is set to the lease's GPUs; ``RLIMIT_AS`` to the lease's memory;
  with ``cpu_share`` < 1 its output is paced as a machine that share as fast would answer, and with
  ``pace_gflops`` its GEMM answers at that share of a fixed reference (``pace``: the demo's miners
  of different speeds).

Extra ports are reserved from the same range and reported as ``{port: port}``: processes run on
the host, so a lease binds its extra ports directly.

The lease environment can be shaped by the operator (and by tests), only through the
constructor — never from renter or validator data: ``path_prefix`` puts absolute directories
ahead of the default ``PATH``; ``extra_env`` adds variables (e.g. ``PYTHONPATH``). The variables
that identify the lease (``HOME``, ``LEASE_ID``, ``CUDA_VISIBLE_DEVICES``, ...) and ``PATH``
itself cannot be overridden; a bad name or value raises ``ValueError`` at construction.

``sandbox`` (:mod:`.sandbox`; the miner sets it whenever it serves anyone but the local demo)
runs every command as the lease's own unprivileged uid in a mount namespace where the miner's
home, wallets and data directory are hidden: a renter cannot read the miner's keys or another
lease's host key. Sandboxed leases have no SFTP (it would run in the miner's process).

Each lease keeps a session log in memory (``logs``: the newest ``SESSION_LOG_LINES`` lines: each
login, each session's command and how it ended), for its renter's ``register.py logs``; it goes
with the lease and does not survive a miner restart.

What it deliberately does not do: isolate anything beyond that (limits are best effort), or
forward ports/agents/X11. The miner wiring refuses this backend on the mainnet subnet
unless forced, and anywhere but the local demo without the sandbox.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import shutil
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from compute.allocation.embedded import sandbox, terminal
from compute.allocation.embedded.activity import sample_lease
from compute.allocation.embedded.lease_env import (
    DEFAULT_PATH,
    RESERVED_ENV,
    check_extra_env,
    check_path_prefix,
)
from compute.allocation.embedded.pace import Pacer, paced_copy
from compute.allocation.embedded.sandbox import SandboxPaths
from compute.allocation.lease.activity import Activity
from compute.allocation.lease.atomic import remove_stale_temps, write_atomic
from compute.allocation.lease.backend import BackendError
from compute.allocation.lease.records import Endpoint, LeaseRecord

logger = logging.getLogger(__name__)

USERNAME = "lease"
_KILL_GRACE_S = 2.0
SESSION_LOG_LINES = 2000
_SHELL = "/bin/bash"  # the login shell of a terminal session, where installed (else /bin/sh)


@dataclass
class _Lease:
    record: LeaseRecord
    home: Path
    host_key: asyncssh.SSHKey
    host_key_line: str
    port: int
    extra_ports: list[int]
    authorized: asyncssh.SSHKey
    acceptor: asyncssh.SSHAcceptor | None = None
    connections: dict[asyncssh.SSHServerConnection, asyncssh.SSHKey | None] = field(default_factory=dict)
    processes: set[asyncio.subprocess.Process] = field(default_factory=set)
    groups: set[int] = field(default_factory=set)  # process groups started, killed on stop
    uid: int | None = None  # the lease's own uid when its commands run sandboxed
    log: deque[str] = field(default_factory=lambda: deque(maxlen=SESSION_LOG_LINES))

    def note(self, text: str) -> None:
        self.log.append(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {text}")


class _LeaseServer(asyncssh.SSHServer):
    """Authentication for one lease: user ``lease``, public key only, the current key only."""

    def __init__(self, lease: _Lease) -> None:
        self._lease = lease
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._lease.connections[conn] = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._lease.connections.pop(self._conn, None)

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        ok = username == USERNAME and key.public_data == self._lease.authorized.public_data
        if ok and self._conn is not None:
            self._lease.connections[self._conn] = key
            peer = self._conn.get_extra_info("peername") or ("?", 0)
            self._lease.note(f"login from {peer[0]} ({key.get_algorithm()} key)")
        return ok


class EmbeddedBackend:
    """In-process SSH rental backend (see the module docstring).

    ``path_prefix``: absolute directories put first on every lease's ``PATH``, in order.
    ``extra_env``: variables added to every lease's environment (not those in ``RESERVED_ENV``).
    Both come from the miner's own configuration; nothing a caller sends reaches them.
    """

    name = "embedded"

    def __init__(
        self,
        data_dir: str | Path,
        ssh_host: str = "127.0.0.1",
        bind_host: str = "0.0.0.0",
        port_range: tuple[int, int] = (40000, 40999),
        enforce_memory: bool = True,
        path_prefix: Sequence[str | os.PathLike[str]] = (),
        extra_env: Mapping[str, str] | None = None,
        sandbox: SandboxPaths | None = None,
        cpu_share: float = 1.0,
        pace_gflops: float = 0.0,
    ) -> None:
        if not 0 < cpu_share <= 1:
            raise ValueError(f"cpu_share must be in (0, 1], got {cpu_share}")
        if pace_gflops < 0:
            raise ValueError(f"pace_gflops must be >= 0, got {pace_gflops}")
        self.cpu_share = cpu_share  # < 1: leases answer as a machine this share as fast (pace.py)
        self.pace_gflops = pace_gflops  # > 0: GEMM answers at cpu_share x this reference (pace.py)
        self.root = Path(data_dir) / "embedded"
        self.ssh_host = ssh_host
        self.bind_host = bind_host
        self.port_range = port_range
        self.enforce_memory = enforce_memory
        self.path_prefix: tuple[str, ...] = check_path_prefix(path_prefix)
        self.extra_env: dict[str, str] = check_extra_env(extra_env or {})
        self.sandbox = sandbox
        self._leases: dict[str, _Lease] = {}
        self._lock = asyncio.Lock()

    # ---------------------------------------------------------------- Backend API

    async def start(self, lease: LeaseRecord) -> Endpoint:
        async with self._lock:
            if lease.lease_id in self._leases:
                return self._endpoint(self._leases[lease.lease_id])
            state = await asyncio.to_thread(self._prepare, lease)
            await self._listen(state)
            self._leases[lease.lease_id] = state
            logger.info("embedded: lease=%s listening on port=%d", lease.lease_id, state.port)
            return self._endpoint(state)

    async def stop(self, lease_id: str) -> None:
        async with self._lock:
            state = self._leases.pop(lease_id, None)
            if state is not None:
                await self._close(state)
            directory = self.root / lease_id
            if directory.exists():
                await asyncio.to_thread(shutil.rmtree, directory, True)

    async def restart(self, lease_id: str) -> None:
        async with self._lock:
            state = self._leases.get(lease_id)
            if state is None:
                raise BackendError(f"lease {lease_id} is not running on this backend")
            await self._close(state)
            await self._listen(state)

    async def set_authorized_key(self, lease_id: str, public_key: str) -> None:
        state = self._leases.get(lease_id)
        if state is None:
            raise BackendError(f"lease {lease_id} is not running on this backend")
        try:
            state.authorized = asyncssh.import_public_key(public_key)
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise BackendError(f"public key does not parse: {exc}") from exc
        for conn, key in list(state.connections.items()):
            if key is None or key.public_data != state.authorized.public_data:
                conn.close()

    async def activity(self, lease: LeaseRecord) -> Activity:
        """A sample for the idle watch: logged-in sessions (this server authenticates them), CPU
        of the lease's processes, NVML utilisation of its GPUs (:mod:`.activity`)."""
        state = self._leases.get(lease.lease_id)
        if state is None or state.acceptor is None:
            raise BackendError(f"lease {lease.lease_id} is not running on this backend")
        sessions = sum(1 for key in state.connections.values() if key is not None)
        return await asyncio.to_thread(sample_lease, lease.lease_id, lease.gpus, sessions, state.uid)

    async def running(self) -> set[str]:
        return {lease_id for lease_id, state in self._leases.items() if state.acceptor is not None}

    async def logs(self, lease_id: str, tail: int) -> tuple[str, list[str]]:
        """The newest ``tail`` lines of the lease's session log (logins, commands, how they ended)."""
        state = self._leases.get(lease_id)
        if state is None:
            raise BackendError(f"lease {lease_id} is not running on this backend")
        return "embedded session log", list(state.log)[-tail:]

    async def close(self) -> None:
        """Stop listening for every lease, keeping their state (used on miner shutdown)."""
        async with self._lock:
            for state in self._leases.values():
                await self._close(state)
            self._leases.clear()

    # ---------------------------------------------------------------- internals

    def _prepare(self, lease: LeaseRecord) -> _Lease:
        """Load or create the lease's host key, home and ports (blocking: file I/O)."""
        directory = self.root / lease.lease_id
        home = directory / "home"
        home.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        key_file, state_file = directory / "host_key", directory / "state.json"
        remove_stale_temps(directory)
        host_key = _load_or_make_host_key(key_file, lease.lease_id)
        ports = self._pick_ports(1 + lease.extra_ports, _previous_ports(state_file))
        uid = None
        if self.sandbox is not None:  # the lease's own uid, kept across restarts with its ports
            taken = {s.uid for s in self._leases.values() if s.uid is not None}
            uid = _previous_uid(state_file) or sandbox.lease_uid(lease.lease_id, taken)
            os.chown(home, uid, uid)
            os.chmod(home, 0o700)
        write_atomic(state_file, json.dumps({"ports": ports, "uid": uid}).encode())
        line = " ".join(host_key.export_public_key("openssh").decode("ascii").split()[:2])
        try:
            authorized = asyncssh.import_public_key(lease.ssh_public_key)
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise BackendError(f"public key does not parse: {exc}") from exc
        return _Lease(lease, home, host_key, line, ports[0], ports[1:], authorized, uid=uid)

    def _pick_ports(self, count: int, preferred: list[int]) -> list[int]:
        taken = {p for s in self._leases.values() for p in (s.port, *s.extra_ports)}
        low, high = self.port_range
        chosen: list[int] = []
        for port in [*preferred, *range(low, high + 1)]:
            if len(chosen) == count:
                break
            if (
                low <= port <= high
                and port not in taken
                and port not in chosen
                and _port_free(self.bind_host, port)
            ):
                chosen.append(port)
        if len(chosen) < count:
            raise BackendError(f"no {count} free port(s) left in {low}-{high}")
        return chosen

    async def _listen(self, state: _Lease) -> None:
        try:
            state.acceptor = await asyncssh.create_server(
                lambda: _LeaseServer(state),
                self.bind_host,
                state.port,
                sock=self._listener(state),
                server_host_keys=[state.host_key],
                process_factory=lambda process: self._session(state, process),
                # SFTP runs in the miner's process: sandboxed leases have none (a symlink could lead out)
                sftp_factory=None
                if self.sandbox is not None
                else lambda chan: asyncssh.SFTPServer(chan, chroot=str(state.home).encode()),
                allow_scp=False,
                agent_forwarding=False,
                x11_forwarding=False,
                allow_pty=True,  # a session that asks for a terminal gets a real PTY (terminal.py)
                login_timeout=30,
                keepalive_interval=30,
                encoding=None,
            )
        except OSError as exc:
            raise BackendError(f"cannot listen on port {state.port}: {exc}") from exc

    def _listener(self, state: _Lease) -> socket.socket | None:
        """A bound socket to serve the lease on instead of ``bind_host:port`` (None: asyncssh binds)."""
        return None

    async def _close(self, state: _Lease) -> None:
        if state.acceptor is not None:
            state.acceptor.close()
            state.acceptor = None
        for conn in list(state.connections):
            conn.close()
        for pgid in list(state.groups):
            _kill_pgid(pgid)
        state.groups.clear()
        if state.processes:
            await asyncio.wait(
                [asyncio.ensure_future(p.wait()) for p in state.processes], timeout=_KILL_GRACE_S
            )

    def _endpoint(self, state: _Lease) -> Endpoint:
        return Endpoint(
            host=self.ssh_host,
            ssh_port=state.port,
            username=USERNAME,
            host_key=state.host_key_line,
            ports={port: port for port in state.extra_ports},
        )

    def _environment(self, state: _Lease) -> dict[str, str]:
        path = (*self.path_prefix, os.path.dirname(sys.executable), *DEFAULT_PATH)
        return {
            **self.extra_env,
            "PATH": ":".join(path),
            "HOME": str(state.home),
            "PWD": str(state.home),
            "USER": USERNAME,
            "LOGNAME": USERNAME,
            "SHELL": "/bin/sh",
            "LANG": "C.UTF-8",
            "LEASE_ID": state.record.lease_id,
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in state.record.gpus),
            "NVIDIA_VISIBLE_DEVICES": ",".join(str(g) for g in state.record.gpus) or "none",
        }

    async def _session(self, state: _Lease, process: asyncssh.SSHServerProcess) -> None:
        """Run one exec/shell request; kill its process group when the channel closes first."""
        command = process.command
        tty = process.get_terminal_type() is not None
        shell = _SHELL if tty and os.access(_SHELL, os.X_OK) else "/bin/sh"  # line editing on a terminal
        argv = ["/bin/sh", "-c", command] if command is not None else [shell]
        if self.sandbox is not None and state.uid is not None:
            spec = sandbox.Spec(str(state.home), state.uid, state.uid, self.sandbox.hide, self.sandbox.keep)
            argv = sandbox.command(spec, argv)
        memory = (
            state.record.memory_mb * 1024 * 1024 if self.enforce_memory and state.record.memory_mb else None
        )
        state.note(
            f"session: {'shell' if command is None else repr(command[:200])}{' on a terminal' if tty else ''}"
        )
        if tty:
            await self._terminal_session(state, process, argv, memory)
            state.note("session ended")
            return
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=state.home,
                env=self._environment(state),
                start_new_session=True,
                preexec_fn=lambda: _limit(memory),
            )
        except OSError as exc:
            process.stderr.write(f"cannot start command: {exc}\n".encode())
            process.exit(127)
            return
        state.processes.add(proc)
        state.groups.add(proc.pid)
        assert proc.stdin is not None
        paced = Pacer(self.cpu_share, reference_gflops=self.pace_gflops)
        pacer = paced if paced.paces else None
        if pacer is not None:
            pacer.input()  # the command itself started now
        feeder = asyncio.ensure_future(_feed_stdin(process.stdin, proc.stdin, pacer))
        try:
            status = await _unless_closed(_finish(proc, process, pacer), process, proc)
            if status is not None:
                process.exit(_exit_status(status))
                state.note(f"session ended: exit status {_exit_status(status)}")
            else:
                state.note("session closed by the client; its command was ended")
        except (OSError, asyncio.TimeoutError, asyncssh.Error) as exc:
            logger.debug("embedded: session of lease=%s ended: %s", state.record.lease_id, exc)
        finally:
            _kill_group(proc)  # the session is gone: its command goes too (background jobs stay)
            state.processes.discard(proc)
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)

    async def _terminal_session(
        self, state: _Lease, process: asyncssh.SSHServerProcess, argv: list[str], memory: int | None
    ) -> None:
        """A session that asked for a PTY: the command on a real terminal (:mod:`.terminal`)."""
        try:
            proc, controller = await terminal.start(
                process, argv, str(state.home), self._environment(state), lambda: _limit(memory)
            )
        except OSError as exc:
            process.stderr.write(f"cannot start command: {exc}\r\n".encode())
            process.exit(127)
            return
        state.processes.add(proc)
        state.groups.add(proc.pid)
        try:
            status = await _unless_closed(terminal.serve(process, proc, controller), process, proc)
            if status is not None:
                process.exit(_exit_status(status))
        except (OSError, asyncio.TimeoutError, asyncssh.Error) as exc:
            logger.debug("embedded: terminal session of lease=%s ended: %s", state.record.lease_id, exc)
        finally:
            _kill_group(proc)
            state.processes.discard(proc)
            os.close(controller)


async def _feed_stdin(
    source: asyncssh.SSHReader, target: asyncio.StreamWriter, pacer: Pacer | None = None
) -> None:
    """Copy the channel's input to the child's stdin and close it at EOF.

    Done here rather than with ``SSHServerProcess.redirect(stdin=...)``: asyncssh's redirect
    registers a ``Queue.join()`` coroutine that only ``process.wait_closed()`` awaits, and a
    session that ends otherwise leaves it un-awaited (a ``RuntimeWarning`` on every session).
    """
    try:
        while True:
            try:
                chunk = await source.read(65536)
            except (asyncssh.BreakReceived, asyncssh.SignalReceived, asyncssh.TerminalSizeChanged):
                continue  # no PTY and no signal delivery on this backend: ignored
            if not chunk:
                break
            if pacer is not None:
                pacer.input(chunk)
            target.write(chunk)
            await target.drain()
    except (OSError, asyncssh.Error):
        pass  # the child closed its stdin or exited, or the channel went away
    finally:
        target.close()


async def _finish(
    proc: asyncio.subprocess.Process, process: asyncssh.SSHServerProcess, pacer: Pacer | None = None
) -> int:
    """Copy the child's stdout (paced by ``pacer``) and stderr to the channel until EOF; return its
    exit code."""

    async def pump(source: asyncio.StreamReader, target: asyncssh.SSHWriter, paced: Pacer | None) -> None:
        async def write(chunk: bytes) -> None:
            target.write(chunk)
            await target.drain()

        try:
            await paced_copy(lambda: source.read(65536), write, paced)
        except (OSError, asyncssh.Error):
            pass  # the channel went away mid-write: the session's end is handled by the caller

    assert proc.stdout is not None and proc.stderr is not None
    await asyncio.gather(pump(proc.stdout, process.stdout, pacer), pump(proc.stderr, process.stderr, None))
    return await proc.wait()


def _exit_status(code: int) -> int:
    return 128 - code if code < 0 else code  # killed by signal N -> 128+N, as shells report


def _limit(memory_bytes: int | None) -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


async def _unless_closed(
    work: Awaitable[int], process: asyncssh.SSHServerProcess, proc: asyncio.subprocess.Process
) -> int | None:
    """``work``'s result (the command's status), or None when the client closed the channel first:
    then the command's group is ended (SIGKILL) and waited for, at most ``_KILL_GRACE_S``."""
    finished = asyncio.ensure_future(work)
    closed = asyncio.ensure_future(process.channel.wait_closed())
    done, _ = await asyncio.wait({finished, closed}, return_when=asyncio.FIRST_COMPLETED)
    if finished in done:
        closed.cancel()
        return finished.result()
    _kill_group(proc)
    finished.cancel()
    await asyncio.gather(finished, return_exceptions=True)
    await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)
    return None


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        _kill_pgid(proc.pid)


def _kill_pgid(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _load_or_make_host_key(key_file: Path, lease_id: str) -> asyncssh.SSHKey:
    """The lease's host key; a missing or unreadable file (a crash before atomic writes) is replaced."""
    if key_file.exists():
        try:
            return asyncssh.read_private_key(key_file)
        except (asyncssh.KeyImportError, OSError, ValueError) as exc:
            logger.warning("lease=%s host key unreadable (%s); making a new one", lease_id, exc)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    write_atomic(key_file, host_key.export_private_key("openssh"), 0o600)
    return host_key


def _previous_uid(state_file: Path) -> int | None:
    """The lease's sandbox uid from before a restart (None when unknown)."""
    try:
        uid = json.loads(state_file.read_text()).get("uid")
    except (OSError, ValueError, AttributeError):
        return None
    return (
        uid
        if isinstance(uid, int) and sandbox.UID_BASE <= uid <= sandbox.UID_BASE + sandbox.UID_SPAN
        else None
    )


def _previous_ports(state_file: Path) -> list[int]:
    """Ports the lease used before (kept across restarts); nothing when the file is missing or bad."""
    try:
        ports = json.loads(state_file.read_text()).get("ports", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [p for p in ports if isinstance(p, int)] if isinstance(ports, list) else []


__all__ = ["RESERVED_ENV", "USERNAME", "EmbeddedBackend"]
