"""A slower demo machine (issue 24, finding 5): an embedded lease at ``cpu_share`` answers as a
machine that much slower would, whatever the box's load. Real asyncssh listener, real SSH client."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import asyncssh
import pytest
from test_embedded_backend import record

from compute.allocation.embedded.backend import EmbeddedBackend
from compute.allocation.embedded.pace import Pacer, paced_copy

PORTS = (43500 + os.getpid() % 300, 43500 + os.getpid() % 300 + 20)


async def _gap(tmp_path: Path, share: float, renter_key) -> float:
    """Seconds between two lines the lease prints 0.4 s apart, as the client receives them."""
    backend = EmbeddedBackend(
        tmp_path / str(share), ssh_host="127.0.0.1", bind_host="127.0.0.1", port_range=PORTS, cpu_share=share
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
            process = await conn.create_process("echo a; sleep 0.4; echo b")
            assert await process.stdout.readline() == "a\n"
            first = time.monotonic()
            assert await process.stdout.readline() == "b\n"
            return time.monotonic() - first
    finally:
        await backend.stop("e" * 32)


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


def test_a_share_outside_0_1_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        EmbeddedBackend(tmp_path, cpu_share=0.0)
    with pytest.raises(ValueError):
        Pacer(1.5)
