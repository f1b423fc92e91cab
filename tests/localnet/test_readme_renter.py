"""The README's renter walk-through, run verbatim against the demo (``localnet --hold -1``).

Each command line of the fenced block under ``### Renter`` runs through bash as written; the only
substitutions are the ones the README tells the reader to make: ``FLAGS`` and ``FEED`` from the
``renters:`` line the demo prints, and ``3f9a1c`` by the lease id ``allocate`` printed. ``HOME`` is
a fresh directory holding ``~/.ssh/id_ed25519.pub`` (and the renter's book); ``python3`` is the
project's environment, as after the README's setup.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from demokit import assert_stopped_cleanly, stop_demo
from localnetkit import REPO

from compute.localnet import renter_command

RENTER_LINE = re.compile(
    r"^renters: python3 neurons/register\.py (?P<flags>.+) resources --feed (?P<feed>\S+)$", re.M
)


def readme_renter_block() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Renter") :]
    start = section.index("```bash\n") + len("```bash\n")
    block = section[start : section.index("```", start)]
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_readme_renter_block_sets_flags_and_feed_then_rents_through_the_feed() -> None:
    lines = readme_renter_block()
    assert lines[0].startswith("FLAGS=") and lines[1].startswith("FEED=")
    assert all(line.startswith("python3 neurons/register.py $FLAGS ") for line in lines[2:])
    assert "resources --feed $FEED" in lines[2] and "allocate --feed $FEED" in lines[3]
    assert len((REPO / "README.md").read_bytes()) <= 16 * 1024


def test_the_demos_renter_command_reads_its_validators_signed_feed() -> None:
    """Without ``--feed`` every demo machine showed "unverified"; the line matches what a reader copies."""
    line = "renters: " + renter_command("--wallet.name validator", "http://127.0.0.1:8123")
    printed = RENTER_LINE.search(line)
    assert printed and printed["feed"] == "http://127.0.0.1:8123"
    assert printed["flags"] == "--wallet.name validator"


def start_demo(workdir: Path) -> tuple[subprocess.Popen, Path]:
    log = workdir / "demo.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "compute", "localnet", "--miners", "2", "--rounds", "1", "--hold", "-1"]
        + ["--workdir", str(workdir / "net")],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        env={**os.environ, "COLUMNS": "400"},
    )
    return proc, log


@pytest.mark.slow
def test_the_readme_renter_walk_through_runs_verbatim_against_the_demo(tmp_path: Path) -> None:
    proc, log = start_demo(tmp_path)
    try:
        deadline = time.monotonic() + 300
        while "holding for renters" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        printed = RENTER_LINE.search(log.read_text())
        assert printed, f"the demo printed no renter command with --feed:\n{log.read_text()[-3000:]}"
        home = tmp_path / "home"
        (home / ".ssh").mkdir(parents=True)
        key = home / ".ssh" / "id_ed25519"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30
        )
        # python3: the project's environment, activated as the README's setup leaves it
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**os.environ, "HOME": str(home), "COLUMNS": "200", "PATH": path}
        lines = readme_renter_block()
        setup = f"FLAGS={shlex.quote(printed['flags'])}\nFEED={shlex.quote(printed['feed'])}\n"
        lease = ""

        def run(line: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                ["bash", "-c", setup + line.replace("3f9a1c", lease)],
                cwd=REPO,
                env=env,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            return done

        resources, allocate, execute, ssh, deallocate = lines[2:]
        shown = run(resources).stdout
        assert "unverified" not in shown, shown
        run(allocate)
        listed = run("python3 neurons/register.py $FLAGS list --json").stdout
        (entry,) = json.loads(listed)["leases"]
        lease = entry["lease_id"][:8]
        assert "Linux" in run(execute).stdout
        assert "readme-walk" in run(ssh, stdin="echo readme-walk\nexit\n").stdout
        run(deallocate)
        left = json.loads(run("python3 neurons/register.py $FLAGS list --json").stdout)["leases"]
        assert left == []
    finally:
        stop_demo(proc)
    assert_stopped_cleanly(proc, log)
