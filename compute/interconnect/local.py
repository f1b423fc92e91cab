"""Participants as local processes (tests, the benchmarks, the cluster demo).

``local_participants(world)`` starts ``world`` processes of ``participant.serve`` and yields their
``PipeChannel``s (endpoint ``local:<pid>``, or the caller's ``names``) and the rendezvous
``init_method``. On a clean exit it closes every stdin and gives them ``grace_s`` to leave; on an
error (a timeout, Ctrl-C) it kills them at once, since they may be waiting in a rendezvous that
will never complete. It sets nothing up beyond the processes: ``wrappers`` (one command prefix per
rank, e.g. ``ip netns exec NS``), ``rendezvous`` (rank 0's address) and ``port`` place them in
network namespaces someone else made.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence

from .session import PipeChannel


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def local_participants(
    world: int,
    threads: int = 1,
    wrappers: Sequence[Sequence[str]] = (),
    rendezvous: str = "127.0.0.1",
    env: Mapping[str, str] | None = None,
    names: Sequence[str] = (),
    port: int | None = None,
    cwd: str | None = None,
    grace_s: float = 10.0,
) -> Iterator[tuple[list[PipeChannel], str]]:
    environ = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1", **(env or {}))
    procs = [
        subprocess.Popen(
            [*(wrappers[rank] if wrappers else ()), sys.executable, "-m", "compute.interconnect.participant"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environ,
            cwd=cwd,
        )
        for rank in range(world)
    ]
    grace = 0.0
    try:
        channels = [
            PipeChannel(names[rank] if names else f"local:{p.pid}", p.stdin, p.stdout)  # type: ignore[arg-type]
            for rank, p in enumerate(procs)
        ]
        yield channels, f"tcp://{rendezvous}:{port or free_port()}"
        grace = grace_s  # done: they leave at the end of their input
    finally:
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]
        for proc in procs:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
