"""``register.py ssh`` gives a real terminal on the embedded backend: prompt, window size, Ctrl-C.

``neurons/register.py ssh LEASE`` runs as a real process on a real pseudo-terminal (python's
``pty``), as a renter's terminal would run it; the lease is served by the real miner app with the
embedded backend. What the renter types goes through the system ``ssh`` to the lease's PTY: the
window size this terminal has (and a change of it) is what the remote ``stty size`` reports, and
Ctrl-C ends the remote foreground command, not the session.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

from compute.operator import EXIT_OK

REGISTER = Path(__file__).resolve().parents[2] / "neurons" / "register.py"


def _set_size(fd: int, rows: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


class Terminal:
    """A process on a pseudo-terminal this test holds the controller end of."""

    def __init__(self, argv: list[str], rows: int, columns: int) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once (the test process has threads)
            _set_size(0, rows, columns)
            os.execv(argv[0], argv)
        self.seen = b""

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def resize(self, rows: int, columns: int) -> None:
        _set_size(self.fd, rows, columns)  # the kernel signals SIGWINCH to the terminal's processes

    def expect(self, marker: str, timeout: float = 20.0) -> str:
        """Read until ``marker`` appears in what the terminal showed since the last match."""
        deadline = time.monotonic() + timeout
        while marker.encode() not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"no {marker!r} within {timeout} s; the terminal showed: {self.seen[-2000:]!r}"
                )
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the terminal closed before {marker!r}: {self.seen[-2000:]!r}")
                self.seen += chunk
        before, _, self.seen = self.seen.partition(marker.encode())
        return before.decode(errors="replace")

    def wait(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.read(self.fd, 65536)  # drain, so the child never blocks writing
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("register.py ssh did not exit")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")
def test_register_ssh_gives_a_terminal_with_its_size_and_ctrl_c_on_the_embedded_backend(subnet):
    code, body = subnet.cli("operator_a", "allocate", "--uid", str(subnet.miner_uid), "--ttl", "30m")
    assert code == EXIT_OK, body
    lease = body["lease"]["lease_id"]
    term = Terminal([sys.executable, str(REGISTER), *subnet.flags("operator_a"), "ssh", lease[:8]], 33, 111)
    try:
        term.type("echo READY-$((40+2))\r")
        term.expect("READY-42")
        term.type("tty; stty size\r")
        shown = term.expect("33 111")  # the window this terminal has
        assert "/dev/pts/" in shown
        term.resize(40, 120)
        time.sleep(0.5)  # ssh sends the window change on SIGWINCH
        term.type("stty size\r")
        term.expect("40 120")
        started = time.monotonic()
        term.type("sleep 30; echo NOT-INTERRUPTED\r")
        time.sleep(1.0)
        term.type("\x03")  # Ctrl-C: to the remote sleep, through the lease's terminal
        term.type("echo ALIVE-$((1+2))\r")
        shown = term.expect("ALIVE-3")
        assert time.monotonic() - started < 15 and "NOT-INTERRUPTED" not in shown.replace(
            "echo NOT-INTERRUPTED", ""
        )
        term.type("exit\r")
        assert term.wait() == 0
    finally:
        try:
            os.kill(term.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert subnet.cli("operator_a", "deallocate", lease)[0] == EXIT_OK


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")
def test_register_ssh_tty_runs_a_command_on_a_terminal(subnet):
    code, body = subnet.cli("operator_a", "allocate", "--uid", str(subnet.miner_uid), "--ttl", "30m")
    assert code == EXIT_OK, body
    lease = body["lease"]["lease_id"]
    argv = [sys.executable, str(REGISTER), *subnet.flags("operator_a"), "ssh", "--tty", lease[:8], "--"]
    term = Terminal([*argv, "test -t 0 && stty size && exit 7"], 25, 90)
    try:
        term.expect("25 90")
        assert term.wait() == 7  # the remote command's status, through register.py
    finally:
        try:
            os.kill(term.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert subnet.cli("operator_a", "deallocate", lease)[0] == EXIT_OK
