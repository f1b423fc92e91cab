"""What an operator expects from the validator: wandb off unless configured and quiet when on, a
clean exit on `pm2 stop` (SIGTERM to the whole process tree), a warning without a validator permit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compute.validator import parse_validator, wandb_wanted

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "key", "expected"),
    [
        ([], None, False),  # the default: off
        ([], "k" * 40, True),  # a key: online
        (["--wandb.on"], None, True),  # explicit: offline
        (["--wandb.off"], "k" * 40, False),  # off wins
    ],
)
def test_wandb_is_off_unless_configured(argv: list[str], key: str | None, expected: bool) -> None:
    s = parse_validator(argv, {})
    assert wandb_wanted(s.wandb_off, s.wandb_on, key)[0] is expected
    assert parse_validator([], {"COMPUTE_WANDB_ON": "1"}).wandb_on


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = path.read_text(errors="replace") if path.exists() else ""
        if text in out:
            return out
        if proc.poll() is not None:
            pytest.fail(f"validator exited {proc.returncode} before {text!r}:\n{out[-3000:]}")
        time.sleep(0.3)
    pytest.fail(f"no {text!r} within {timeout}s:\n{out[-3000:]}")


@pytest.mark.slow
def test_validator_without_permit_warns_runs_wandb_quietly_and_stops_cleanly_on_sigterm(
    tmp_path: Path, sim_chain, make_wallet
) -> None:
    path, state = sim_chain
    wallet = make_wallet("vali")
    state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5.0, False)  # no permit
    log = tmp_path / "validator.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_", "WANDB"))}
    argv = [sys.executable, str(REPO / "neurons" / "validator.py"), "--subtensor.network", f"sim:{path}"]
    argv += ["--netuid", "27", "--wallet.name", "vali", "--wallet.path", str(tmp_path / "wallets")]
    argv += ["--validator.round_blocks", "1", "--validator.data_dir", str(tmp_path / "vdata"), "--wandb.on"]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            argv, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True
        )
    try:
        _wait_for(log, "round=1 progress 0/0 miners done", proc)
        os.killpg(proc.pid, signal.SIGTERM)  # pm2 stop (treekill): the validator and wandb's service
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = log.read_text(errors="replace")
    assert "has NO validator permit on netuid 27" in out and "refuse" in out
    assert "wandb on, offline (--wandb.on without WANDB_API_KEY)" in out
    assert "wandb logging offline" in out  # it really ran …
    assert "wandb:" not in out and "Deprecat" not in out  # … without banner or deprecation chatter
    assert "Traceback" not in out
    assert any((tmp_path / "vdata" / "wandb").rglob("offline-run-*"))
