"""The timing process streams big lines to the spool, never holding them.

Real SSH to an embedded-backend lease served by another process; the "worker" is a small script
that writes lines of the size the test asks for (with or without their newline). The timing process
is driven through its own protocol (``Clock.call``), as ``PogSession`` drives it.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_clock import lease_process

from compute.pog.spool import SpooledLine
from compute.validator.session.clock import Clock, spooled_lines

# writes "ready", then per request line "SIZE END": SIZE bytes of "a", then END: "nl" a newline,
# "exit" nothing and exit (a line cut off), "stall" nothing and wait (a line that never ends)
LINES = r"""
import sys, time
out = sys.stdout.buffer
out.write(b"ready\n"); out.flush()
for request in sys.stdin.buffer:
    size, end = request.split()
    size, block = int(size), b"a" * (1 << 20)
    while size > 0:
        out.write(block[:size]); size -= len(block)
    if end == b"nl":
        out.write(b"\n")
    out.flush()
    if end == b"exit":
        break
    if end == b"stall":
        time.sleep(10)
"""
MB = 1 << 20


@pytest.fixture
def lease(tmp_path: Path):
    """(host, port, username, host_key, client key) of a lease served by ANOTHER process."""
    with lease_process(tmp_path) as served:
        yield served


async def _open(clock: Clock, lease) -> str:
    host, port, username, host_key, key = lease
    header = {
        "op": "open",
        "sid": "s1",
        "host": host,
        "port": port,
        "username": username,
        "key": key.export_private_key("openssh").decode(),
        "host_key": host_key,
        "command": f"python3 -u -c {shlex.quote(LINES)}",
        "timeout": 30,
    }
    reply, first = await clock.call(header)
    assert reply["ok"] and first == b"ready\n", reply
    return "s1"


async def _ask(
    clock: Clock, sid: str, size: int, end: str, limit: int, timeout: float = 60
) -> tuple[dict, list]:
    header = {"op": "request", "sid": sid, "limit": limit, "timeout": timeout, "spool": True}
    reply, payload = await clock.call(header, f"{size} {end}\n".encode())
    return reply, spooled_lines(reply, payload) if reply["ok"] else []


def _hwm_mb(pid: int) -> float:
    """Peak resident memory of a process (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.slow
async def test_a_huge_line_streams_through_the_timing_process_without_its_memory(lease) -> None:
    """A 256 MB line: the timing process's peak memory stays where it was (before: it held the line
    twice, ~512 MB more), the line lands whole in one spool file, stamped on arrival."""
    clock = Clock()
    try:
        sid = await _open(clock, lease)
        reply, (small,) = await _ask(clock, sid, 100, "nl", 512 * MB)
        assert small == b"a" * 100 + b"\n" and "spooled" not in reply  # small lines stay inline
        before = _hwm_mb(clock.pid)
        asked = time.monotonic()
        reply, (line,) = await _ask(clock, sid, 256 * MB, "nl", 512 * MB)
        assert isinstance(line, SpooledLine) and line.size == 256 * MB + 1
        assert Path(line.path).parent == Path(clock.spool_dir)
        assert os.path.getsize(line.path) == line.size
        with open(line.path, "rb") as spooled:
            spooled.seek(line.size - 3)
            assert spooled.read() == b"aa\n"
        assert asked < reply["stamps"][0] <= time.monotonic()  # the validator's clock, at the last byte
        growth = _hwm_mb(clock.pid) - before
        print(f"timing process VmHWM {before:.0f} MB -> +{growth:.1f} MB for a 256 MB line")
        assert growth < 48, growth
        line.discard()
        assert os.listdir(clock.spool_dir) == []
    finally:
        clock.close()
    assert not os.path.exists(clock.spool_dir)


@pytest.mark.slow
async def test_a_refused_or_cut_off_line_leaves_no_spool_file(lease) -> None:
    clock = Clock()
    try:
        sid = await _open(clock, lease)
        reply, _ = await _ask(clock, sid, 6 * MB, "nl", 4 * MB)  # past the cap: refused midway
        assert not reply["ok"] and reply["kind"] == "protocol", reply
        assert "longer than 4194304 bytes" in reply["error"]
        assert os.listdir(clock.spool_dir) == []
        await clock.call({"op": "close", "sid": sid})

        sid = await _open(clock, lease)  # the worker dies mid-line (peer death)
        reply, _ = await _ask(clock, sid, 3 * MB, "exit", 64 * MB)
        assert not reply["ok"] and reply["kind"] == "eof", reply
        assert os.listdir(clock.spool_dir) == []
        await clock.call({"op": "close", "sid": sid})

        sid = await _open(clock, lease)  # a line that never ends: silent past the deadline
        reply, _ = await _ask(clock, sid, 3 * MB, "stall", 64 * MB, timeout=2)
        assert not reply["ok"] and reply["kind"] == "timeout", reply
        await clock.call({"op": "close", "sid": sid})  # the validator gives the session up
        assert os.listdir(clock.spool_dir) == []
    finally:
        clock.close()


KILLED = """
import sys, time
from pathlib import Path
from compute.validator.session.clock import Clock
clock = Clock()
Path(clock.spool_dir, "line-in-flight").write_bytes(b"x" * 4096)
print(clock.spool_dir, clock.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_a_killed_validator_leaves_no_spool() -> None:
    """kill -9 of the validator: its timing process sees the socket close and removes the spool."""
    validator = subprocess.Popen(
        [sys.executable, "-c", KILLED],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    spool, _ = validator.stdout.readline().split()
    assert os.path.exists(Path(spool, "line-in-flight"))
    validator.send_signal(signal.SIGKILL)
    validator.wait(10)
    until = time.monotonic() + 10
    while os.path.exists(spool) and time.monotonic() < until:
        time.sleep(0.05)
    assert not os.path.exists(spool)


def test_a_small_dev_shm_is_not_the_spool(monkeypatch) -> None:
    """A container's default 64 MB /dev/shm would refuse 16 openings in flight: the disk's temp dir then."""
    from compute.pog import spool

    assert spool.spool_root() in (str(spool.SHM), None)
    monkeypatch.setattr(spool, "SHM_MIN_FREE", 1 << 62)
    assert spool.spool_root() is None
    monkeypatch.setattr(spool, "SHM", Path("/nonexistent-shm"))
    monkeypatch.setattr(spool, "SHM_MIN_FREE", 0)
    assert spool.spool_root() is None
