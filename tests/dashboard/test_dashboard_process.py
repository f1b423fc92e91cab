"""The validator serves its dashboard from a child process, away from its clock.

The real ``neurons/validator.py`` on a simulated chain with ``--dashboard.port``: the page answers
from another process (not the validator's: its renders, JSON and HTTP parsing never take the
validator's event loop or GIL) running at a lower CPU priority, and that process leaves when the
validator is killed with ``kill -9``. How far a page flood still moves the validator's timing is a
benchmark figure: ``python -m compute bench hardening --only dashboard``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from compute.chain import SimChainState

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_dashboard_is_a_niced_child_process_that_leaves_with_the_validator(
    tmp_path: Path, make_wallet
) -> None:
    chain = tmp_path / "chain.db"
    state = SimChainState.create(chain, netuid=27, block_time=1.0)
    wallet = make_wallet("vali")
    state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0, True)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_", "WANDB"))}
    argv = [
        sys.executable, str(REPO / "neurons" / "validator.py"), "--subtensor.network", f"sim:{chain}",
        "--netuid", "27", "--wallet.name", "vali", "--wallet.path", str(tmp_path / "wallets"),
        "--validator.data_dir", str(tmp_path / "vdata"), "--wandb.off", "--dashboard.port", str(port),
    ]  # fmt: skip
    log = open(tmp_path / "validator.log", "wb")  # noqa: SIM115
    validator = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=env | {"PYTHONPATH": str(REPO)}
    )
    try:
        deadline, answer = time.monotonic() + 90, None
        while answer is None and time.monotonic() < deadline:
            assert validator.poll() is None, (tmp_path / "validator.log").read_text()[-3000:]
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            except httpx.HTTPError:
                time.sleep(0.3)
        assert answer is not None and answer.status_code == 200, (tmp_path / "validator.log").read_text()[
            -3000:
        ]
        serving = [c for c in psutil.Process(validator.pid).children() if _listens(c, port)]
        assert len(serving) == 1 and serving[0].pid != validator.pid
        dashboard = serving[0]
        assert dashboard.nice() >= psutil.Process(validator.pid).nice() + 10
        assert not _listens(psutil.Process(validator.pid), port)  # the validator itself serves nothing
        validator.send_signal(signal.SIGKILL)
        validator.wait(10)
        dashboard.wait(15)  # raises psutil.TimeoutExpired if the child outlives its validator
        assert not dashboard.is_running()
    finally:
        if validator.poll() is None:
            validator.kill()
        log.close()


def _listens(process: psutil.Process, port: int) -> bool:
    try:
        return any(
            c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
            for c in process.net_connections()
        )
    except psutil.Error:
        return False
