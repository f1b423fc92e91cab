"""A session of the embedded backend that asked for a terminal: the command runs on a real PTY.

When a client requests a PTY (``ssh`` to a shell from a terminal, ``ssh -t``), the lease's
command gets a pseudo-terminal as its controlling terminal: the window size the client gave (and
each later change, delivered as SIGWINCH by the kernel), the terminal type in ``TERM``, and the
line discipline of a real terminal, so Ctrl-C typed by the renter reaches the remote foreground
process as SIGINT, a shell prints its prompt and line editing works. Signals the client sends
(``SignalReceived``) go to the session's process group.

Deliberately not here: starting a session without a terminal, sandbox and limits (the backend
builds the argv and the ``preexec`` it runs before this module makes the PTY the controlling one).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import signal
import struct
import termios
from collections.abc import Callable, Mapping

import asyncssh

logger = logging.getLogger(__name__)

_READ = 65536


def set_size(fd: int, columns: int, rows: int) -> None:
    """The terminal's window size (the kernel signals SIGWINCH to its foreground group)."""
    if columns > 0 and rows > 0:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", min(rows, 65535), min(columns, 65535), 0, 0))


def _controlling(before: Callable[[], None]) -> Callable[[], None]:
    def preexec() -> None:  # in the child, after setsid(): fd 0 is the PTY's terminal side
        before()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    return preexec


async def start(
    process: asyncssh.SSHServerProcess,
    argv: list[str],
    cwd: str,
    env: Mapping[str, str],
    preexec: Callable[[], None],
) -> tuple[asyncio.subprocess.Process, int]:
    """Start ``argv`` on a new PTY sized as the client asked; returns the child and the PTY's
    controller end (the caller pumps it with :func:`serve` and closes it)."""
    controller, terminal = os.openpty()
    try:
        columns, rows, _, _ = process.get_terminal_size()
        set_size(terminal, columns, rows)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            cwd=cwd,
            env={**env, "TERM": process.get_terminal_type() or "xterm"},
            start_new_session=True,
            preexec_fn=_controlling(preexec),
        )
    except BaseException:
        os.close(controller)
        raise
    finally:
        os.close(terminal)
    os.set_blocking(controller, False)
    return proc, controller


async def serve(process: asyncssh.SSHServerProcess, proc: asyncio.subprocess.Process, controller: int) -> int:
    """Copy the PTY to the channel and the channel to the PTY until the command's output ends;
    window changes and signals from the client are applied. Returns the command's exit code."""
    feeder = asyncio.ensure_future(_feed(process, proc, controller))
    try:
        await _pump(process, controller)
        return await proc.wait()
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)


async def _pump(process: asyncssh.SSHServerProcess, controller: int) -> None:
    """The terminal's output to the channel (waiting for the client when it reads slowly)."""
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()
    loop.add_reader(controller, ready.set)
    try:
        while True:
            await ready.wait()
            ready.clear()
            try:
                data = os.read(controller, _READ)
            except BlockingIOError:
                continue
            except OSError as exc:  # EIO: every holder of the terminal side closed it (the command ended)
                if exc.errno != errno.EIO:
                    logger.debug("pty read failed: %s", exc)
                return
            if not data:
                return
            process.stdout.write(data)
            await process.stdout.drain()
    finally:
        loop.remove_reader(controller)


async def _feed(
    process: asyncssh.SSHServerProcess, proc: asyncio.subprocess.Process, controller: int
) -> None:
    """The client's keystrokes to the terminal; its window changes and signals applied."""
    while True:
        try:
            chunk = await process.stdin.read(_READ)
        except asyncssh.TerminalSizeChanged as change:
            with contextlib.suppress(OSError):
                set_size(controller, change.width, change.height)
            continue
        except asyncssh.SignalReceived as received:
            _signal_group(proc, received.signal)
            continue
        except asyncssh.BreakReceived:
            continue
        except (OSError, asyncssh.Error):
            return
        if not chunk:
            return  # EOF from the client: the terminal stays, as with sshd
        view = memoryview(chunk)
        while view:
            try:
                view = view[os.write(controller, view) :]
            except BlockingIOError:
                await asyncio.sleep(0.01)  # the terminal's input queue is full: the command is not reading
            except OSError:
                return


def _signal_group(proc: asyncio.subprocess.Process, name: str) -> None:
    try:
        signum = signal.Signals[f"SIG{name}"]
    except KeyError:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)


__all__ = ["serve", "set_size", "start"]
