"""neurons/miner.py refuses to start with one sentence that says what to change, and exit code 1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from minerkit import free_port, miner_args

from compute.chain import SimChainState

ROOT = Path(__file__).resolve().parents[2]
NETUID = 5


@pytest.fixture
def registered(tmp_path: Path, wallets) -> str:
    state = SimChainState.create(tmp_path / "chain.db", netuid=NETUID, block_time=1.0)
    miner = wallets["miner"]
    state.register(miner.hotkey.ss58_address, miner.coldkeypub.ss58_address, 5000.0, False)
    return f"sim:{tmp_path / 'chain.db'}"


def run_miner(tmp_path: Path, network: str, *extra: str, env: dict[str, str] | None = None, port: int = 0):
    args = [
        sys.executable,
        str(ROOT / "neurons" / "miner.py"),
        *miner_args(tmp_path, network, NETUID, port=port),
    ]
    args += extra
    return subprocess.run(
        args, capture_output=True, text=True, timeout=90, cwd=ROOT, env={**os.environ, **(env or {})}
    )


@pytest.mark.slow
def test_port_in_use_is_named_with_the_flag_to_change(tmp_path: Path, registered) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_miner(tmp_path, registered, "--miner.backend", "embedded", port=port)
    assert done.returncode == 1, done.stderr
    assert f"cannot bind the miner API to 127.0.0.1:{port}" in done.stderr
    assert "--axon.port" in done.stderr


@pytest.mark.slow
def test_unreachable_chain_fails_fast_with_a_clear_error(tmp_path: Path, wallets) -> None:
    dead = f"ws://127.0.0.1:{free_port()}"  # nothing listens there
    done = run_miner(tmp_path, dead, "--miner.backend", "embedded", "--axon.external_ip", "127.0.0.1")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"cannot reach the chain '{dead}'" in done.stderr
    assert "--subtensor.network" in done.stderr


@pytest.mark.slow
def test_docker_backend_without_a_docker_engine_says_so(tmp_path: Path, registered) -> None:
    nowhere = f"unix://{tmp_path / 'no-docker.sock'}"
    done = run_miner(tmp_path, registered, "--miner.backend", "docker", env={"DOCKER_HOST": nowhere})
    assert done.returncode == 1, done.stderr
    assert "Docker is not reachable" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.docker
def test_docker_backend_with_a_missing_lease_image_says_how_to_build_it(tmp_path: Path, registered) -> None:
    from dockerkit import require_docker

    require_docker()  # an engine must answer, or this would test the "not reachable" refusal instead
    missing = "compute-base:no-such-tag-i15"
    done = run_miner(tmp_path, registered, "--miner.backend", "docker", "--miner.base_image", missing)
    assert done.returncode == 1, done.stderr
    assert f"the lease image '{missing}' is not on this Docker engine" in done.stderr
    assert "scripts/build_base_image.sh" in done.stderr and "--miner.base_image" in done.stderr
    assert "Traceback" not in done.stderr
