"""``free_port``: a port for a server that binds it later, drawn where no outgoing connection takes it."""

from __future__ import annotations

import socket

from compute.localnet import processes
from compute.localnet.processes import free_port


def test_a_free_port_lies_outside_the_ephemeral_range_and_can_be_bound():
    low, high = (int(x) for x in processes.EPHEMERAL_RANGE.read_text().split())
    ports = {free_port() for _ in range(50)}
    assert all(not low <= port <= high for port in ports), (low, high, sorted(ports))
    assert len(ports) > 40  # drawn at random, not one port handed out again and again
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports.pop()))


def test_without_room_outside_it_the_os_picks(monkeypatch, tmp_path):
    wide = tmp_path / "range"
    wide.write_text("1024\t65535\n")  # every port is ephemeral: no range is safe, the OS chooses
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE", wide)
    assert processes._outside_ephemeral() == []
    assert 1024 <= free_port() <= 65535
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert processes._outside_ephemeral() == [] and free_port() > 0
