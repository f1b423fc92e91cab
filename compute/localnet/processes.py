"""Child processes of the local demo: start, stream, stop — and never leave one behind.

Every child starts in a process group of its own (its session), so what it starts in turn (PoG
workers, lease shells) goes with it: ``stop_all`` signals each group, SIGTERM then SIGKILL.
``stop_on_signals`` turns SIGTERM and SIGHUP (what pm2, systemd and a closed terminal send) into
the same unwinding as Ctrl-C, so the demo's ``finally`` stops every group; a second signal while it
stops is ignored (``stop_all`` already ends in SIGKILL). What it does not survive: SIGKILL of the
demo itself (nothing runs then; pm2 and systemd send SIGTERM first).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, for a server that binds it later.

    Drawn outside the kernel's ephemeral range where there is room (above it, else below it): a
    port the OS picks for ``bind(0)`` is one any outgoing connection may take in the meantime, and
    under parallel tests one did ("Address already in use" as a validator's surface started)."""
    for low, high in _outside_ephemeral():
        for _ in range(64):
            port = int.from_bytes(os.urandom(2), "big") % (high - low + 1) + low
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _outside_ephemeral() -> list[tuple[int, int]]:
    """Port ranges of at least 1,000 ports outside the ephemeral range (none when it is unknown)."""
    try:
        low, high = (int(x) for x in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return []
    ranges = [(high + 1, 65535), (max(10000, low - 10000), low - 1)]
    return [(a, b) for a, b in ranges if b - a >= 1000]


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    _pump: threading.Thread | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ProcessGroup:
    """Owns the demo's processes; ``stop_all`` is safe to call twice and from signal handlers."""

    def __init__(self, log_dir: Path, cwd: Path) -> None:
        self.log_dir = log_dir
        self.cwd = cwd
        self.children: list[Child] = []

    def start(
        self,
        name: str,
        args: list[str],
        on_line: Callable[[str, str], None] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> Child:
        """Start ``python -m args...``; its output goes to ``log_dir/name.log`` (and ``on_line``)."""
        log_path = self.log_dir / f"{name}.log"
        # Children print through a pipe: give rich a real width so their tables do not wrap.
        env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS=os.environ.get("COLUMNS", "140"))
        env.update(extra_env or {})
        sink = open(log_path, "wb")  # noqa: SIM115 - handed to the child / pump thread
        proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if on_line else sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        child = Child(name, proc, log_path)
        if on_line is not None:
            child._pump = threading.Thread(target=_pump, args=(proc.stdout, sink, name, on_line), daemon=True)
            child._pump.start()
        else:
            sink.close()
        self.children.append(child)
        log.debug("started %s pid=%d log=%s", name, proc.pid, log_path)
        return child

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every child's process group, then SIGKILL whatever outlives ``grace_s``."""
        for child in self.children:
            if child.alive:
                _signal_group(child.proc, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in self.children:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s ignored SIGTERM; killing it", child.name)
                _signal_group(child.proc, signal.SIGKILL)
                child.proc.wait(timeout=5)
        for child in self.children:
            if child._pump is not None:
                child._pump.join(timeout=2)
            if child.proc.stdout is not None and (child._pump is None or not child._pump.is_alive()):
                child.proc.stdout.close()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwinds like Ctrl-C (every ``finally`` runs); ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_number(interrupt: KeyboardInterrupt) -> int:
    """The signal behind ``interrupt``: a :class:`Terminated`'s, else SIGINT (Ctrl-C)."""
    return interrupt.signum if isinstance(interrupt, Terminated) else signal.SIGINT


def stop_on_signals() -> None:
    """Main thread only: SIGTERM/SIGHUP raise :class:`Terminated`, SIGINT ``KeyboardInterrupt``;
    once one arrived, later ones are ignored so the stop that follows is not cut short."""

    def _raise(signum: int, _frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        log.info("%s: stopping every child", signal.Signals(signum).name)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _raise)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _pump(stream: IO[bytes], sink: IO[bytes], name: str, on_line: Callable[[str, str], None]) -> None:
    with sink:
        for raw in iter(stream.readline, b""):
            sink.write(raw)
            sink.flush()
            on_line(name, raw.decode(errors="replace").rstrip())
