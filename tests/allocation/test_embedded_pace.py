"""A slower demo machine: an embedded lease at ``cpu_share`` answers as a
machine that much slower would, whatever the box's load. Real asyncssh listener, real SSH client."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import asyncssh
import pytest
from portspace import OFFSET
from test_embedded_backend import record

from compute.allocation.embedded.backend import EmbeddedBackend
from compute.allocation.embedded.pace import Pacer, paced_copy, reference_seconds

PORTS = (OFFSET + 43500 + os.getpid() % 300, OFFSET + 43500 + os.getpid() % 300 + 20)


def commit_line(m: int = 512, n: int = 4096, p: int = 512, op: str = "commit", gpus: int = 1) -> bytes:
    challenge = {"m": m, "n": n, "p": p, "gpu_count": gpus, "chunk": 1024, "precision": "fp32"}
    return json.dumps({"op": op, "challenge": challenge}).encode() + b"\n"


async def _session(tmp_path: Path, share: float, renter_key, command: str, stdin: bytes = b"", gflops=0.0):
    """(first line, seconds from sending ``stdin`` to the last line) of ``command`` in a lease."""
    backend = EmbeddedBackend(
        tmp_path / f"{share}-{gflops}",
        ssh_host="127.0.0.1",
        bind_host="127.0.0.1",
        port_range=PORTS,
        cpu_share=share,
        pace_gflops=gflops,
    )
    ep = await backend.start(record("e" * 32, renter_key))
    pinned = ([asyncssh.import_public_key(ep.host_key)], [], [])
    try:
        async with asyncssh.connect(
            "127.0.0.1",
            ep.ssh_port,
            username="lease",
            client_keys=[renter_key.private],
            known_hosts=pinned,
            agent_path=None,
            config=None,
        ) as conn:
            process = await conn.create_process(command, encoding=None)
            first = await process.stdout.readline()
            started = time.monotonic()
            if stdin:
                process.stdin.write(stdin)
            await process.stdout.readline()
            return first, time.monotonic() - started
    finally:
        await backend.stop("e" * 32)


async def _gap(tmp_path: Path, share: float, renter_key) -> float:
    """Seconds between two lines the lease prints 0.4 s apart, as the client receives them."""
    first, gap = await _session(tmp_path, share, renter_key, "echo a; sleep 0.4; echo b")
    assert first == b"a\n"
    return gap


async def test_a_lease_at_half_speed_answers_in_twice_the_time(tmp_path: Path, renter_key) -> None:
    full = await _gap(tmp_path, 1.0, renter_key)
    half = await _gap(tmp_path, 0.5, renter_key)
    assert 0.35 < full < 0.6, full
    assert 0.75 < half < 1.0, half  # 0.4 s of work answered as 0.8 s


async def test_paced_output_keeps_its_order_and_spacing() -> None:
    clock = [0.0]
    pacer = Pacer(0.25, clock=lambda: clock[0])
    pacer.input()  # the request arrived at t = 0
    assert [pacer.release_at(t) for t in (0.1, 0.2, 0.15)] == [0.4, 0.8, 0.8]  # in order, never earlier
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for chunk in (b"a", b"b", b""):
        queue.put_nowait(chunk)
    out: list[bytes] = []

    async def write(chunk: bytes) -> None:
        out.append(chunk)

    await paced_copy(queue.get, write, Pacer(0.5))
    assert out == [b"a", b"b"]


@pytest.mark.parametrize(
    ("line", "seconds"),
    [
        (commit_line(), 2 * 512 * 4096 * 512 / 2e9),  # 2 m n p flops at 2 GFLOPS
        (commit_line(gpus=2), 2 * 2 * 512 * 4096 * 512 / 2e9),
        (commit_line(op="warmup"), 2 * 512 * 2048 * 512 / 2e9),  # a warm-up computes two chunks
        (b'{"op": "open", "request": {}}', 0.0),
        (b'{"op": "commit", "challenge": {"m": "x"}}', 0.0),  # not a request the worker would run
        (b'{"op": "commit"', 0.0),
        (b"cat > worker.py", 0.0),
    ],
)
def test_a_gemm_request_is_worth_its_work_at_the_reference(line: bytes, seconds: float) -> None:
    assert reference_seconds(line, 2.0) == pytest.approx(seconds)


def test_gemm_answers_keep_the_reference_pace_whatever_the_box_does() -> None:
    """Agreement: a commit answered after 0.1 s (a quiet box) or 0.5 s (a busy one) is
    released at the same moment, its work at share x reference; a box slower than the reference
    falls back to elapsed / share (later, never sooner)."""
    clock = [0.0]
    work = 2 * 512 * 4096 * 512 / (0.5 * 2e9)  # 2.15 s at half of 2 GFLOPS
    for answered in (0.1, 0.5):
        pacer = Pacer(0.5, clock=lambda: clock[0], reference_gflops=2.0)
        clock[0] = 0.0
        line = commit_line()
        pacer.input(line[:20])  # a request may arrive in pieces: only a whole line counts
        pacer.input(line[20:])
        assert pacer.release_at(answered) == pytest.approx(work)
    pacer.input(b'{"op": "open", "request": {}}\n')  # the next request is not a GEMM: share pacing
    assert pacer.release_at(0.1) == pytest.approx(work)  # never before what was already released
    slow = Pacer(0.5, clock=lambda: clock[0], reference_gflops=2.0)
    slow.input(commit_line())
    assert slow.release_at(3.0) == pytest.approx(6.0)
    assert Pacer(1.0, reference_gflops=2.0).paces and not Pacer(1.0).paces


async def test_a_lease_answers_a_commit_at_the_reference_pace(tmp_path: Path, renter_key) -> None:
    """Real SSH: the lease echoes a commit request at once; paced at 0.5 x 2 GFLOPS its answer comes
    when that work would be done (0.5 s), not at once; at full speed without a reference, at once."""
    line = commit_line(m=256, n=4096, p=256)  # 0.54 GFLOP: 0.54 s at 1 GFLOPS
    first, paced = await _session(tmp_path, 0.5, renter_key, "echo ready; head -n 1", line, gflops=2.0)
    assert first == b"ready\n"
    _, free = await _session(tmp_path, 1.0, renter_key, "echo ready; head -n 1", line)
    assert 0.5 < paced < 0.9, paced
    assert free < 0.3, free


def test_a_share_outside_0_1_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        EmbeddedBackend(tmp_path, cpu_share=0.0)
    with pytest.raises(ValueError):
        Pacer(1.5)
    with pytest.raises(ValueError):
        EmbeddedBackend(tmp_path, pace_gflops=-1.0)
