"""Ctrl-C a command while its network namespaces exist, then check none is left."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable


def ctrl_c_once_made(
    proc: subprocess.Popen, ours: Callable[[int], list[str]], count: int, settle_s: float, what: str
) -> None:
    """Wait (60 s at most) until ``proc`` made ``count`` namespaces (``ours(pid)``), let it work
    ``settle_s`` inside them, press Ctrl-C: it must exit 130 and leave none behind."""
    try:
        deadline = time.monotonic() + 60
        while len(ours(proc.pid)) < count and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert len(ours(proc.pid)) == count, what
        time.sleep(settle_s)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 128 + signal.SIGINT
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert ours(proc.pid) == []
