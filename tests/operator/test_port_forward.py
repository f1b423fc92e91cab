"""``register.py port-forward LEASE PORT``: a local port reaches a server listening inside the lease.

The real ``neurons/register.py`` in its own process against the real miner on 127.0.0.1 (embedded
backend; Docker marked ``docker``): a web server started in the lease on its 127.0.0.1 is fetched
through the local port, byte for byte; Ctrl-C ends the forward with exit 130.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from shellflow import REPO, allocate, cli, cli_text

from compute.operator import EXIT_OK, EXIT_USAGE


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _fetch(url: str, deadline_s: float = 20.0) -> bytes:
    """GET ``url``, retried while the server in the lease is still starting."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.read()
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def forward_journey(subnet, tmp_path: Path) -> None:
    lease = allocate(subnet)
    inside = free_port()
    payload = os.urandom(300_000)
    (tmp_path / "blob.bin").write_bytes(payload)
    code, body = cli(subnet, "operator_a", "cp", str(tmp_path / "blob.bin"), f"{lease}:blob.bin")
    assert code == EXIT_OK, body
    server = f"nohup python3 -m http.server {inside} --bind 127.0.0.1 >/dev/null 2>&1 &"
    code, body = cli(subnet, "operator_a", "exec", lease, "--", server)
    assert code == EXIT_OK, body
    local = free_port()
    argv = [
        sys.executable,
        str(REPO / "neurons" / "register.py"),
        *subnet.flags("operator_a"),
        "port-forward",
        lease,
        str(inside),
        "--local-port",
        str(local),
    ]
    forwarding = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        line = forwarding.stdout.readline()
        assert line == f"Forwarding 127.0.0.1:{local} -> port {inside} of lease {lease}; Ctrl-C stops\n", (
            line + forwarding.stderr.read() if forwarding.poll() is not None else line
        )
        assert _fetch(f"http://127.0.0.1:{local}/blob.bin") == payload
        assert _fetch(f"http://127.0.0.1:{local}/blob.bin") == payload  # each connection its own relay
    finally:
        forwarding.send_signal(signal.SIGINT)
        _, err = forwarding.communicate(timeout=30)
    assert forwarding.returncode == 130 and err.endswith("port-forward stopped\n"), err


@pytest.mark.slow
def test_a_local_port_reaches_a_server_inside_an_embedded_lease(subnet, tmp_path):
    forward_journey(subnet, tmp_path)


@pytest.mark.docker
def test_a_local_port_reaches_a_server_inside_a_docker_lease(docker_subnet, tmp_path):
    forward_journey(docker_subnet, tmp_path)


def test_a_port_already_taken_here_is_one_line(subnet):
    lease = allocate(subnet)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = cli_text(subnet, "operator_a", "port-forward", lease, "80", "--local-port", str(port))
    assert code == EXIT_USAGE and err.startswith(f"error (usage): cannot listen on 127.0.0.1:{port}: ")
    assert err.count("\n") == 1
    code, _, err = cli_text(subnet, "operator_a", "port-forward", lease, "70000")
    assert code == EXIT_USAGE and "70000 is outside 1..65535" in err
