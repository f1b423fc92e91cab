"""Participants as local processes on 127.0.0.1 (tests, the benchmark, later the cluster demo).

``local_participants(world)`` starts ``world`` processes of ``participant.serve`` and yields their
``PipeChannel``s (endpoint ``local:<pid>``) and the rendezvous ``init_method``; on exit it closes
every stdin and waits, killing what is left. It sets nothing up beyond the processes: ``wrappers``
(one command prefix per rank, e.g. ``ip netns exec NS``) and ``rendezvous`` (rank 0's address)
place them in network namespaces someone else made.
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
) -> Iterator[tuple[list[PipeChannel], str]]:
    environ = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1", **(env or {}))
    procs = [
        subprocess.Popen(
            [*(wrappers[rank] if wrappers else ()), sys.executable, "-m", "compute.interconnect.participant"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environ,
        )
        for rank in range(world)
    ]
    try:
        channels = [PipeChannel(f"local:{p.pid}", p.stdin, p.stdout) for p in procs]  # type: ignore[arg-type]
        yield channels, f"tcp://{rendezvous}:{free_port()}"
    finally:
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
