"""Where the neurons' log lines go, through real processes: INFO and below on stdout, warnings and
errors on stderr (pm2 files the two in its out and error logs); a command whose stdout is its
answer keeps every line on stderr."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

EMIT = """
import logging, sys
from compute.logs import configure_logging
configure_logging(debug=True, info_to_stdout=sys.argv[1] == "split")
log = logging.getLogger("compute.demo")
log.debug("a debug line")
log.info("an info line")
log.warning("a warning line")
log.error("an error line")
try:
    1 / 0
except ZeroDivisionError:
    log.exception("a failure")
"""


def _emit(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", EMIT, mode], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def _lines(text: str) -> list[str]:
    return [line.split(" compute.demo: ")[1] for line in text.splitlines() if " compute.demo: " in line]


def test_info_and_below_go_to_stdout_warnings_and_errors_to_stderr() -> None:
    proc = _emit("split")
    assert proc.returncode == 0, proc.stderr
    assert _lines(proc.stdout) == ["a debug line", "an info line"]
    assert _lines(proc.stderr) == ["a warning line", "an error line", "a failure"]
    assert "ZeroDivisionError" in proc.stderr and "Traceback" not in proc.stdout


def test_commands_that_answer_on_stdout_keep_every_log_line_on_stderr() -> None:
    proc = _emit("stderr")
    assert proc.stdout == ""
    assert _lines(proc.stderr) == [
        "a debug line",
        "an info line",
        "a warning line",
        "an error line",
        "a failure",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("neuron", ["miner", "validator"])
def test_a_neuron_writes_its_info_to_stdout_and_its_error_to_stderr(
    neuron: str, tmp_path: Path, make_wallet
) -> None:
    """The real neuron, as pm2 starts it, up to its first error: its hotkey is not registered."""
    make_wallet(neuron)  # under tmp_path / "wallets"
    chain = tmp_path / "chain.db"
    subprocess.run(
        [sys.executable, "-m", "compute", "chain", "create", str(chain)], cwd=ROOT, check=True, timeout=60
    )
    proc = subprocess.run(
        [sys.executable, f"neurons/{neuron}.py", "--subtensor.network", f"sim:{chain}",
         "--wallet.name", neuron, "--wallet.path", str(tmp_path / "wallets"), "--logging.debug",
         f"--{neuron}.data_dir", str(tmp_path / "data"), "--env_file", str(tmp_path / "none.env")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert " INFO " in proc.stdout or " DEBUG " in proc.stdout, proc.stdout
    assert all(level not in proc.stdout for level in (" WARNING ", " ERROR ")), proc.stdout
    assert " INFO    compute.chain.client: chain connected" in proc.stdout
    assert " ERROR " in proc.stderr and "is not registered on netuid 27" in proc.stderr
    assert all(level not in proc.stderr for level in (" INFO ", " DEBUG ")), proc.stderr
