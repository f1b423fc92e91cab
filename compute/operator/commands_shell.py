"""``register.py ssh|exec|cp|port-forward|logs``: reach into a lease with its pinned host key, no hand-built ssh lines.

- ``ssh LEASE [-- COMMAND...]`` runs the system OpenSSH client (an interactive shell needs a real
  terminal) with the lease's known_hosts file, ``StrictHostKeyChecking=yes`` and no ``~/.ssh/config``;
  it exits with ssh's status. ``--json`` prints the command line instead of running it.
- ``exec LEASE -- COMMAND...`` runs one command over asyncssh, streams its output (or captures it
  with ``--json``: up to ``--max-output`` MiB per stream, spooled to a temporary file and written out
  a piece at a time, so memory stays flat; past the cap the answer is the error
  ``output_truncated``, with the kept part and the exit status) and exits with the command's status.
- ``cp SRC... DST`` copies over SFTP; exactly one side names the lease as ``LEASE:PATH`` (a lease id
  or unique prefix), ``-r`` for directories; a copy that moves less than 64 KiB in
  ``--idle-timeout`` seconds fails, and a download lands under its name only once complete
  (``compute.operator.transfer``: the same copy again resumes it).
- ``port-forward LEASE PORT`` listens on a local port and carries each connection to PORT inside
  the lease through a relay session on the pinned connection (``compute.operator.forward``).
- ``logs LEASE [--tail N]`` asks the lease's miner for the lease's own logs (signed, owner only):
  a Docker lease's container logs, an embedded lease's session log.

Every connection verifies the host key the miner signed; a mismatch refuses before anything is
sent. The handlers return a ``Result`` like the others; ``exit_code`` carries the remote status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shlex
import shutil
import socket
import subprocess
import sys
from typing import IO, Any

from rich.console import Console

from compute.argv import bounded, positive
from compute.operator.capture import Spool
from compute.operator.commands import LEASE_HELP, Result, resolve_lease_id
from compute.operator.errors import EXIT_REFUSED, LeaseNotFound, OutputTruncated, UsageError
from compute.operator.forward import forward
from compute.operator.service import Operator
from compute.operator.shell import MAX_CAPTURE_BYTES, LeaseAccess, LeaseShell, RunResult, ssh_argv
from compute.operator.transfer import TransferLimits
from compute.protocol import MAX_LOG_LINES

MIB = 1024 * 1024

_REMOTE_RE = re.compile(r"^([0-9a-fA-F]{4,32}):(.*)$", re.DOTALL)


def add_shell_commands(sub) -> None:  # noqa: ANN001 - the parser factory of compute.operator.cli
    ssh = sub("ssh", "open a shell on a lease (system ssh, pinned host key)")
    ssh.add_argument("lease", help=LEASE_HELP)
    ssh.add_argument(
        "remote_command", nargs="*", metavar="COMMAND", help="after --: run this instead of a shell"
    )
    ssh.add_argument("--tty", action="store_true", help="force a terminal (ssh -t), e.g. for a remote top")
    run = sub("exec", "run a command on a lease and exit with its status")
    run.add_argument("lease", help=LEASE_HELP)
    run.add_argument("remote_command", nargs="+", metavar="COMMAND", help="the command, after --")
    run.add_argument("--timeout", type=positive, help="give up (and end the command) after this many seconds")
    run.add_argument(
        "--max-output",
        type=bounded(0.001, 4096),
        default=MAX_CAPTURE_BYTES / MIB,
        help="with --json: MiB of stdout and of stderr kept; past it the answer is output_truncated "
        f"(default {MAX_CAPTURE_BYTES // MIB})",
    )
    copy = sub("cp", "copy files to or from a lease (LEASE:PATH on one side)")
    copy.add_argument("paths", nargs="+", metavar="PATH", help="SRC... DST; one side LEASE:PATH")
    copy.add_argument("-r", "--recursive", action="store_true", help="copy directories")
    copy.add_argument(
        "--idle-timeout",
        type=positive,
        default=TransferLimits.idle_s,
        help="fail a copy that moves less than 64 KiB in this many seconds "
        f"(default {TransferLimits.idle_s:g})",
    )

    fwd = sub("port-forward", "reach a port inside a lease from a local port, until Ctrl-C")
    fwd.add_argument("lease", help=LEASE_HELP)
    fwd.add_argument("port", type=bounded(1, 65535, int), help="the port inside the lease (its 127.0.0.1)")
    fwd.add_argument(
        "--local-port",
        type=bounded(0, 65535, int),
        help="the local port (default: PORT when free here, else any free one; 0: any)",
    )
    fwd.add_argument("--bind", default="127.0.0.1", help="the local address to listen on (default 127.0.0.1)")
    logs = sub("logs", "a lease's own logs, from its miner (Docker: the container's; embedded: its sessions)")
    logs.add_argument("lease", help=LEASE_HELP)
    logs.add_argument(
        "--tail", type=bounded(1, MAX_LOG_LINES, int), default=200, help="newest lines to show (default 200)"
    )


async def cmd_port_forward(op: Operator, args: argparse.Namespace) -> Result:
    access = _access(op, args.lease)
    local = args.local_port if args.local_port is not None else _free_or_any(args.bind, args.port)
    stream = getattr(args, "out_stream", None) or sys.stdout

    def ready(host: str, port: int) -> None:
        if args.json:
            line = json.dumps(
                {"ok": True, "lease_id": access.lease_id, "local": f"{host}:{port}", "lease_port": args.port}
            )
        else:
            line = f"Forwarding {host}:{port} -> port {args.port} of lease {access.lease_id}; Ctrl-C stops"
        print(line, file=stream, flush=True)

    async with await LeaseShell.open(access) as shell:
        try:
            await forward(shell, args.port, args.bind, local, ready)
        except OSError as exc:
            raise UsageError(f"cannot listen on {args.bind}:{local}: {exc.strerror or exc}") from None
        except asyncio.CancelledError:
            print("port-forward stopped", file=getattr(args, "err_stream", None) or sys.stderr, flush=True)
            args.interrupt_reported = True
            raise
    return Result({"lease_id": access.lease_id})


def _free_or_any(host: str, port: int) -> int:
    """``port`` when it is free here, else 0 (any free port)."""
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return 0
    return port


async def cmd_logs(op: Operator, args: argparse.Namespace) -> Result:
    lease = resolve_lease_id(op.book, op.hotkey, args.lease)
    answer = await op.logs(lease, args.tail)
    payload = {"lease_id": lease, "source": answer.source, "lines": list(answer.lines)}

    def render(console: Console) -> None:
        console.print(f"{answer.source} of lease {lease} ({len(answer.lines)} lines):", highlight=False)
        for line in answer.lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)

    return Result(payload, render)


def _access(op: Operator, text: str) -> LeaseAccess:
    lease = resolve_lease_id(op.book, op.hotkey, text)
    entry = op.book.get(lease)
    if entry is None or entry.owner_hotkey != op.hotkey:
        raise LeaseNotFound(
            f"lease {lease} is not in your book; run `status {lease} --miner-hotkey ...` first"
        )
    return LeaseAccess.of(entry)


def _command_line(parts: list[str]) -> str:
    """One part is a shell line as typed (``exec L -- 'ls | wc -l'``); several are quoted words."""
    return parts[0] if len(parts) == 1 else " ".join(shlex.quote(p) for p in parts)


async def cmd_ssh(op: Operator, args: argparse.Namespace) -> Result:
    access = _access(op, args.lease)
    argv = ssh_argv(access, args.remote_command, tty=True if args.tty else None)
    if args.json:
        return Result({"lease_id": access.lease_id, "argv": argv, "command": shlex.join(argv)})
    if shutil.which("ssh") is None:
        raise UsageError("the OpenSSH client (ssh) is not installed; use `register.py exec LEASE -- COMMAND`")
    code = subprocess.run(argv, check=False).returncode  # noqa: S603 - argv built from the book, no shell
    return Result({"lease_id": access.lease_id, "exit_status": code}, exit_code=code)


class _TextSink:
    """Bytes from the lease to a text stream (a console's file), flushed per chunk."""

    def __init__(self, stream: IO[Any]) -> None:
        self._stream = stream
        self._binary = getattr(stream, "buffer", None)

    def write(self, data: bytes) -> None:
        if self._binary is not None:
            self._binary.write(data)
            self._binary.flush()
        else:
            self._stream.write(data.decode("utf-8", errors="replace"))
        self._stream.flush()


def run_json(result: RunResult, lease_id: str, out: Spool, err: Spool) -> dict[str, Any]:
    """``exec --json``'s answer; past the cap, the error ``output_truncated`` with what was kept."""
    payload: dict[str, Any] = {
        "lease_id": lease_id,
        "command": result.command,
        "exit_status": result.exit_status,
        "stdout": out,
        "stderr": err,
        "truncated": out.truncated or err.truncated,
        "elapsed_s": round(result.elapsed_s, 3),
    }
    if payload["truncated"]:
        over = [
            f"{name} ({spool.size + spool.dropped} bytes)"
            for name, spool in (("stdout", out), ("stderr", err))
            if spool.truncated
        ]
        error = OutputTruncated(
            f"lease {lease_id}: {' and '.join(over)} passed the --max-output cap of {out.limit} bytes; the "
            f"first {out.limit} bytes of each are below (the command ran to its end, exit status "
            f"{result.exit_status}); run it without --json to stream all of it, or redirect it to a file on the lease"
        )
        payload |= {"ok": False, "error": {"code": error.code, "message": error.message}}
    return payload


async def cmd_exec(op: Operator, args: argparse.Namespace) -> Result:
    access = _access(op, args.lease)
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout:g}")
    if not 0 < args.max_output <= 4096:
        raise UsageError(f"--max-output must be in (0, 4096] MiB, got {args.max_output:g}")
    command = _command_line(args.remote_command)
    if not args.json:
        sinks: tuple[Any, Any] = (
            _TextSink(args.out_stream or sys.stdout),
            _TextSink(args.err_stream or sys.stderr),
        )
    else:
        sinks = (Spool(int(args.max_output * MIB)), Spool(int(args.max_output * MIB)))
    async with await LeaseShell.open(access) as shell:
        result = await shell.run(command, timeout=args.timeout, stdout=sinks[0], stderr=sinks[1])
    if not args.json:
        return Result(
            {"lease_id": access.lease_id, "exit_status": result.exit_status}, exit_code=result.exit_status
        )
    payload = run_json(result, access.lease_id, *sinks)
    return Result(payload, exit_code=EXIT_REFUSED if payload["truncated"] else result.exit_status)


def split_remote(path: str) -> tuple[str | None, str]:
    """``('3f9a', 'dir/x')`` for ``3f9a:dir/x``; ``(None, path)`` for a local path."""
    match = _REMOTE_RE.match(path)
    if match is None:
        return None, path
    return match.group(1), match.group(2) or "."


async def cmd_cp(op: Operator, args: argparse.Namespace) -> Result:
    if len(args.paths) < 2:
        raise UsageError("cp needs a source and a destination: cp SRC... DST (one side LEASE:PATH)")
    *sources, target = [split_remote(p) for p in args.paths]
    remote_sources = {lease for lease, _ in sources if lease is not None}
    upload = target[0] is not None
    if upload and remote_sources:
        raise UsageError("copy between leases is not supported: one side must be local")
    if not upload and not remote_sources:
        raise UsageError("neither side names a lease: write LEASE:PATH (e.g. 3f9a1c:results/)")
    if not upload and (len(remote_sources) > 1 or any(lease is None for lease, _ in sources)):
        raise UsageError("all sources of a download must be on one lease (LEASE:PATH each)")
    lease_text = target[0] if upload else next(iter(remote_sources))
    assert lease_text is not None
    access = _access(op, lease_text)
    try:
        limits = TransferLimits(idle_s=args.idle_timeout)
    except ValueError as exc:
        raise UsageError(f"--idle-timeout: {exc}") from None
    paths = [path for _, path in sources]
    async with await LeaseShell.open(access) as shell:
        if upload:
            await shell.put(paths, target[1], recursive=args.recursive, limits=limits)
        else:
            await shell.get(paths, target[1], recursive=args.recursive, limits=limits)
    direction = "upload" if upload else "download"
    payload = {"lease_id": access.lease_id, "direction": direction, "sources": paths, "target": target[1]}
    where = f"lease {access.lease_id[:8]}"
    text = (
        f"Copied {len(paths)} path(s) {'to' if upload else 'from'} {where}: {', '.join(paths)} -> {target[1]}"
    )
    return Result(payload, lambda console: console.print(text, markup=False, highlight=False))


SHELL_HANDLERS = {
    "ssh": cmd_ssh,
    "exec": cmd_exec,
    "cp": cmd_cp,
    "logs": cmd_logs,
    "port-forward": cmd_port_forward,
}
