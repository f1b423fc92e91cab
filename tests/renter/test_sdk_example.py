"""docs/sdk.md's examples, run as written against the local demo (``localnet --hold``).

The demo runs its round, then keeps its miners serving and prints the settings renters use; the
examples are cut out of the page and run as scripts with those settings in their environment.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from demokit import assert_stopped_cleanly, stop_demo

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "sdk.md"


def example(name: str) -> str:
    """The python block that follows ``<!-- sdk-example: NAME -->`` on the page."""
    match = re.search(rf"<!-- sdk-example: {name} -->\s*```python\n(.*?)```", PAGE.read_text(), re.S)
    assert match, f"docs/sdk.md has no sdk-example {name}"
    return match.group(1)


def start_demo(workdir: Path, *args: str) -> tuple[subprocess.Popen, dict[str, str], Path]:
    """``localnet --hold -1`` in the background; returns it, the renter settings it printed, its log."""
    log = workdir / "demo.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compute",
            "localnet",
            "--miners",
            "2",
            "--rounds",
            "2",  # a miner whose first test a loaded CI machine made late is tested again
            "--hold",
            "-1",
            "--workdir",
            str(workdir / "net"),
            *args,
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        env={**os.environ, "COLUMNS": "400"},
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        text = log.read_text()
        if "holding for renters" in text:
            line = next(li for li in text.splitlines() if li.startswith("renters (SDK"))
            found = dict(re.findall(r"(BT_\w+)=(\S+)", line))
            return proc, found, log
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    stop_demo(proc)
    raise AssertionError(f"the demo did not start holding:\n{log.read_text()[-3000:]}")


@pytest.fixture
def demo(tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc, found, log = start_demo(tmp_path, "--dashboard", "--dashboard-port", str(port))
    found["COMPUTE_FEED"] = f"http://127.0.0.1:{port}"  # the demo validator's signed machine feed
    yield found, tmp_path
    stop_demo(proc)
    assert_stopped_cleanly(proc, log)


def run_example(name: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / f"{name}.py"
    script.write_text(example(name))
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env={**os.environ, **env, "PYTHONPATH": str(REPO), "HOME": str(cwd)},  # its lease book: ~/.compute
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.slow
def test_the_sdk_examples_run_against_the_local_demo(demo):
    found, root = demo
    assert set(found) == {"BT_NETWORK", "BT_WALLET_PATH", "BT_WALLET", "COMPUTE_FEED"}
    work = root / "sync"
    work.mkdir()
    done = run_example("sync", found, work)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    proven = [line for line in lines if line.startswith("uid ") and line.endswith("proven by a validator")]
    assert len(proven) == 2, done.stdout  # both demo machines, from the validator's signed feed
    assert any(line.startswith("rented ") for line in lines) and "started" in lines
    assert f"cores: {os.cpu_count()}" in lines or any(line.startswith("cores: ") for line in lines)
    work = root / "async"
    work.mkdir()
    done = run_example("async", found, work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("step 3") == 2 and done.stdout.count("exit 0") == 2, done.stdout
    found.pop("COMPUTE_FEED")
    for name in ("sync", "async"):  # every lease the examples rented was released on its miner
        leases = book(found, root / name / ".compute" / "register")
        assert leases and {lease["state"] for lease in leases} == {"released"}, leases


def book(found: dict[str, str], data_dir: Path) -> list[dict]:
    """``register.py list --refresh --all`` with the demo's settings over one lease book."""
    argv = [
        sys.executable,
        str(REPO / "neurons" / "register.py"),
        "--subtensor.network",
        found["BT_NETWORK"],
        "--wallet.path",
        found["BT_WALLET_PATH"],
        "--wallet.name",
        found["BT_WALLET"],
        "--register.data_dir",
        str(data_dir),
        "list",
        "--refresh",
        "--all",
        "--json",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["leases"]
