"""``register.py port-forward LEASE PORT``: a local port that reaches a port inside the lease.

``forward`` listens on ``bind:local_port`` (127.0.0.1 by default) and, for each connection, opens a
session on the lease's pinned SSH connection running ``RELAY``: a few lines of Python in the lease
that connect to ``127.0.0.1:PORT`` there and copy bytes between it and the session. Bytes are
copied both ways until either side closes; the local listener stays until the command is stopped
(Ctrl-C, SIGTERM).

Why a relay and not SSH port forwarding (``ssh -L``): both backends refuse forwarding on purpose
(the Docker lease's sshd runs with ``AllowTcpForwarding no`` unless its miner opts in; the
embedded backend forwards nothing), and the relay reaches nothing the lease's own commands cannot.
The lease needs ``python3`` (the base images and the embedded backend's host have it).

What it deliberately does not do: reverse forwards (lease -> here), UDP, or listen beyond
``bind`` (another host reaches the port only if you bind it to an address it can reach).
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Callable

import asyncssh

from compute.operator.errors import OperatorError
from compute.operator.shell import LeaseShell

logger = logging.getLogger(__name__)

_CHUNK = 65536
RELAY = """\
import socket, sys, threading
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def up():
    while True:
        d = sys.stdin.buffer.read1(65536)
        if not d:
            break
        s.sendall(d)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while True:
    d = s.recv(65536)
    if not d:
        break
    sys.stdout.buffer.write(d)
    sys.stdout.buffer.flush()
"""


def relay_command(port: int) -> str:
    return f"python3 -c {shlex.quote(RELAY)} {int(port)}"


async def forward(
    shell: LeaseShell,
    lease_port: int,
    bind: str = "127.0.0.1",
    local_port: int = 0,
    ready: Callable[[str, int], None] | None = None,
) -> None:
    """Forward ``bind:local_port`` (0: a free one) to ``127.0.0.1:lease_port`` in the lease until
    cancelled; ``ready(host, port)`` is called once listening."""

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        process: asyncssh.SSHClientProcess | None = None
        try:
            process = await shell.process(relay_command(lease_port))
            await _pump(reader, writer, process)
        except OperatorError as exc:
            logger.warning("port-forward: %s", exc.message)
        except asyncio.CancelledError:  # the forward is stopping: this connection is dropped with it
            pass  # (the connection's own task: nobody awaits it, and asyncio would log the cancel)
        finally:
            if process is not None:
                process.close()
            writer.close()

    server = await asyncio.start_server(one, bind, local_port)
    async with server:
        host, port = server.sockets[0].getsockname()[:2]
        if ready is not None:
            ready(host, port)
        await server.serve_forever()


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, process: asyncssh.SSHClientProcess
) -> None:
    async def up() -> None:
        while data := await reader.read(_CHUNK):
            process.stdin.write(data)
            await process.stdin.drain()
        process.stdin.write_eof()

    async def down() -> None:
        while data := await process.stdout.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    sending = asyncio.ensure_future(up())
    try:
        await down()  # the lease's side closed (or the relay could not connect): this one is done
        await asyncio.wait_for(asyncio.shield(sending), 5)
    except (OSError, asyncssh.Error, asyncio.TimeoutError, ConnectionError) as exc:
        logger.debug("port-forward connection ended: %r", exc)
    finally:
        sending.cancel()
        try:  # the relay's last words, e.g. nothing listens on that port in the lease
            said = await asyncio.wait_for(process.stderr.read(4000), 1)
        except (OSError, asyncssh.Error, asyncio.TimeoutError):
            said = b""
        lines = said.decode("utf-8", "replace").strip().splitlines()
        if lines:
            logger.warning("port-forward: the relay in the lease said: %s", lines[-1])


__all__ = ["RELAY", "forward", "relay_command"]
