"""``scripts/ci_docker.sh`` starts dockerd as a daemon that holds none of its caller's descriptors.

A dockerd started with the caller's open descriptors keeps them for good: a lock the CI step holds
is never released, and a pipe the caller reads (``$(...)``, a log pipe) never reaches its end. The
script starts it with ``scripts/detach.sh`` (own session, stdin /dev/null, output to the log, every
other descriptor closed). The first test runs the real script with stand-ins for ``docker`` and
``dockerd`` on PATH (the real engine is never touched: no second dockerd is started, none is
stopped); the second runs ``detach.sh`` itself.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_DOCKERD = f"""#!{sys.executable}
import json, os, time
state = os.environ["FAKE_STATE"]
fds = {{}}
for name in os.listdir("/proc/self/fd"):
    try:
        fds[name] = os.readlink(f"/proc/self/fd/{{name}}")
    except OSError:
        pass  # the descriptor listdir used, closed again
with open(state + "/dockerd.json.tmp", "w") as out:
    json.dump({{"pid": os.getpid(), "sid": os.getsid(0), "fds": fds}}, out)
os.rename(state + "/dockerd.json.tmp", state + "/dockerd.json")
time.sleep(120)
"""
# the base image "exists" at the version build_base_image.sh wants (its label), so nothing is built
BASE_VERSION = re.search(r"^VERSION=(\d+)", (REPO / "scripts" / "build_base_image.sh").read_text(), re.M)
FAKE_DOCKER = f"""#!/bin/sh
case "$1" in
  info) test -e "$FAKE_STATE/dockerd.json" ;;
  version) echo 0.0-fake ;;
  image) echo {BASE_VERSION.group(1) if BASE_VERSION else "?"}; exit 0 ;;
  *) exit 1 ;;
esac
"""
NOOP = "#!/bin/sh\nexit 0\n"
NOTHING_RUNS = "#!/bin/sh\nexit 1\n"  # pgrep: no dockerd is running (the real one is not ours)


def _held(tmp_path: Path) -> tuple[int, int, int, Path]:
    """A pipe (read end, write end) and a file holding an exclusive lock, all inheritable."""
    read_end, write_end = os.pipe()
    lock_path = tmp_path / "ci.lock"
    lock = os.open(lock_path, os.O_CREAT | os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    for fd in (write_end, lock):
        os.set_inheritable(fd, True)
    return read_end, write_end, lock, lock_path


def _released(read_end: int, write_end: int, lock: int, lock_path: Path) -> tuple[bool, bool]:
    """After the caller closes its ends: (the pipe reached its end, the lock can be taken)."""
    os.close(write_end)
    os.close(lock)
    os.set_blocking(read_end, False)
    try:
        pipe_ended = os.read(read_end, 1) == b""
    except BlockingIOError:
        pipe_ended = False  # someone else still holds the write end
    finally:
        os.close(read_end)
    probe = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock_free = True
    except BlockingIOError:
        lock_free = False
    finally:
        os.close(probe)
    return pipe_ended, lock_free


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_ci_docker_starts_dockerd_without_the_callers_descriptors(tmp_path):
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("reads /proc; as root (otherwise the script starts dockerd through sudo)")
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    shims = {"dockerd": FAKE_DOCKERD, "docker": FAKE_DOCKER, "pgrep": NOTHING_RUNS}
    for tool in ("debootstrap", "ip", "openssl", "nsenter", "mkfs.ext4", "losetup"):
        shims[tool] = NOOP
    for name, text in shims.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    read_end, write_end, lock, lock_path = _held(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_STATE": str(state),
        "DOCKERD_LOG": str(tmp_path / "dockerd.log"),
        "DOCKER_WAIT_S": "30",
    }
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "ci_docker.sh")],
        pass_fds=(write_end, lock),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    seen = json.loads((state / "dockerd.json").read_text())
    try:
        assert done.returncode == 0, done.stderr
        assert "Docker engine 0.0-fake is up" in done.stdout
        targets = set(seen["fds"].values())
        assert f"pipe:[{os.fstat(write_end).st_ino}]" not in targets, seen
        assert str(lock_path) not in targets, seen
        assert set(seen["fds"]) == {"0", "1", "2"}, seen
        assert seen["fds"]["0"] == "/dev/null"
        assert seen["fds"]["1"] == seen["fds"]["2"] == str(tmp_path / "dockerd.log")
        assert seen["sid"] == seen["pid"], seen  # its own session: no terminal, no caller's group
        assert _released(read_end, write_end, lock, lock_path) == (True, True)
    finally:
        _stop(seen["pid"])


def test_detach_gives_the_daemon_only_null_input_and_its_log(tmp_path):
    if sys.platform != "linux":
        pytest.skip("reads /proc")
    read_end, write_end, lock, lock_path = _held(tmp_path)
    log = tmp_path / "daemon.log"
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "detach.sh"), str(log), "sh", "-c", "echo started; exec sleep 60"],
        pass_fds=(write_end, lock),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    try:
        deadline = time.monotonic() + 10
        while True:  # the sleep itself, past its start-up (it opens and closes locale files)
            try:
                fds = {n: os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
            except FileNotFoundError:  # an fd closed between the listing and its readlink: look again
                fds = {}
            if fds and Path(f"/proc/{pid}/comm").read_text().strip() == "sleep" and len(fds) <= 3:
                break
            assert time.monotonic() < deadline, f"the daemon never settled: {fds}"
            time.sleep(0.05)
        assert fds == {"0": "/dev/null", "1": str(log), "2": str(log)}
        assert os.getsid(pid) == pid
        assert log.read_text() == "started\n"
        assert _released(read_end, write_end, lock, lock_path) == (True, True)
    finally:
        _stop(pid)
    with pytest.raises(subprocess.CalledProcessError):  # usage: a log and a command
        subprocess.run(
            ["bash", str(REPO / "scripts" / "detach.sh"), str(log)], check=True, capture_output=True
        )
