"""``localnet --hold`` under a supervisor: SIGTERM (pm2, systemd) or Ctrl-C ends the demo and every
process it started, their own children included, within 5 s — a real demo, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from localnetkit import REPO

HOLDING = "holding for renters"


def _descendants(root: psutil.Process) -> list[psutil.Process]:
    """Every process below ``root``, and every process in the sessions of its direct children
    (one a child started and left to init would still be in its session)."""
    children = root.children(recursive=True)
    sessions = {os.getsid(c.pid) for c in root.children()}
    found = {p.pid: p for p in children}
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) in sessions:
                found.setdefault(proc.pid, proc)
        except (ProcessLookupError, PermissionError):
            continue
    return list(found.values())


def _alive(procs: list[psutil.Process]) -> list[str]:
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(" ".join(proc.cmdline())[:160])
        except psutil.NoSuchProcess:
            continue
    return alive


def _wait_for_hold(demo: subprocess.Popen[str], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if HOLDING in log.read_text(errors="replace"):
            return
        if demo.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"the demo never held (rc={demo.poll()}):\n{log.read_text()[-3000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_a_holding_localnet_leaves_no_process_behind(tmp_path: Path, sig: signal.Signals) -> None:
    log = tmp_path / "demo.log"
    with open(log, "w") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "compute", "localnet", "--miners", "1", "--pog-n", "1024", "--hold", "-1",
             "--workdir", str(tmp_path / "net")],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=sink, text=True,
        )  # fmt: skip
    below: list[psutil.Process] = []
    try:
        _wait_for_hold(demo, log, timeout=240)
        below = _descendants(psutil.Process(demo.pid))
        assert any("neurons.miner" in " ".join(p.cmdline()) for p in below), _alive(below)

        sent = time.monotonic()
        demo.send_signal(sig)  # the demo alone, as pm2 and systemd (KillMode=process) send it
        demo.wait(timeout=5)
        while _alive(below) and time.monotonic() - sent < 5:
            time.sleep(0.1)
        assert _alive(below) == [], f"alive {time.monotonic() - sent:.1f} s after {sig.name}"
        assert demo.returncode == 0, log.read_text()[-2000:]  # the demo itself passed before it held
        assert f"{sig.name}: stopping every child" in log.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
        for proc in below:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
