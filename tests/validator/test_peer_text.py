"""Hostile text from miners never reaches a terminal or a log, never crashes our rendering.

Played against the real processes: two miners (``cheaters/hostile_miner.py``, the real miner app
with real wallets on a simulated chain) put terminal control codes and rich markup into every
string they send: specs, templates, lease health, allocate refusals and the worker's errors from
inside a lease. The real validator (``neurons/validator.py --validator.rounds 1``) must finish its
one round, print its table and stop; the real ``register.py`` must show every answer. No byte
outside printable text (newlines apart) may appear in their output or in the validator's log file.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compute.chain import SimChainState

REPO = Path(__file__).resolve().parents[2]
HOSTILE_MINER = Path(__file__).parent / "cheaters" / "hostile_miner.py"
# any C0 control but newline, DEL, C1 controls, bidi overrides/isolates, line/paragraph separators
UNPRINTABLE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def unprintable(text: str) -> list[str]:
    return sorted({repr(c) for c in UNPRINTABLE.findall(text)})


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_", "WANDB"))}
    env["PYTHONPATH"] = str(REPO)
    env["COLUMNS"] = "250"
    return env


@pytest.fixture
def hostile_net(tmp_path: Path, make_wallet):
    """(chain path, wallets dir, {name: hotkey}) with both hostile miners serving."""
    chain = tmp_path / "chain.db"
    state = SimChainState.create(chain, netuid=27, block_time=0.5)
    hotkeys = {}
    for name, stake, permit in (("vali", 5000.0, True), ("renter", 1000.0, True)):
        wallet = make_wallet(name)
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, stake, permit)
        hotkeys[name] = wallet.hotkey.ss58_address
    for name in ("refuser", "worker"):
        wallet = make_wallet(name)
        state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 10.0, False)
        hotkeys[name] = wallet.hotkey.ss58_address
    proc = subprocess.Popen(
        [sys.executable, str(HOSTILE_MINER), str(tmp_path), str(chain)],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ready = tmp_path / "hostile.ready"
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
        time.sleep(0.2)
    yield chain, tmp_path / "wallets", hotkeys
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _common(chain: Path, wallets: Path, name: str) -> list[str]:
    return [
        "--subtensor.network",
        f"sim:{chain}",
        "--netuid",
        "27",
        "--wallet.name",
        name,
        "--wallet.path",
        str(wallets),
    ]


@pytest.mark.slow
def test_hostile_miner_text_cannot_stall_or_paint_the_validator(tmp_path: Path, hostile_net) -> None:
    chain, wallets, _ = hostile_net
    argv = [
        sys.executable,
        str(REPO / "neurons" / "validator.py"),
        *_common(chain, wallets, "vali"),
        "--validator.rounds", "1",
        "--validator.round_blocks", "1",
        "--validator.weights_blocks", "1",
        "--validator.allow_same_ip",
        "--validator.load_budget", "0",
        "--validator.min_timed_s", "0",
        "--validator.pog_m", "64", "--validator.pog_n", "4096", "--validator.pog_p", "64",
        "--validator.device", "cpu",
        "--validator.miner_timeout", "60",
        "--validator.data_dir", str(tmp_path / "vdata"),
        "--logging.logging_dir", str(tmp_path / "vlogs"),
        "--wandb.off",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("Proof-of-GPU round") == 1  # one round, then it stopped
    assert "report failed" not in proc.stderr
    log = (tmp_path / "vlogs" / "validator.log").read_text()
    assert "worker error" in proc.stdout + log and "FAKE OK" in proc.stdout + log  # the reasons are shown ...
    assert "\\x1b[2J" in proc.stdout + log  # ... as escapes
    for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr), ("log file", log)):
        assert unprintable(text) == [], f"validator {name} carries a miner's control characters"


def _register(chain: Path, wallets: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [
        sys.executable,
        str(REPO / "neurons" / "register.py"),
        *_common(chain, wallets, "renter"),
        "--register.data_dir",
        str(tmp_path / "register"),
        "--register.timeout",
        "20",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=_env(), cwd=tmp_path)


@pytest.mark.slow
def test_hostile_miner_text_cannot_crash_or_paint_register_py(tmp_path: Path, hostile_net) -> None:
    chain, wallets, hotkeys = hostile_net
    key = tmp_path / "id_renter"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    runs = {
        "resources": _register(chain, wallets, tmp_path, "resources"),
        "templates": _register(chain, wallets, tmp_path, "templates"),
        "refused allocate": _register(
            chain, wallets, tmp_path, "allocate", "--hotkey", hotkeys["refuser"], "--ssh-key", f"{key}.pub"
        ),
        "allocate": _register(
            chain, wallets, tmp_path, "allocate", "--hotkey", hotkeys["worker"], "--ssh-key", f"{key}.pub"
        ),
        "list --refresh": _register(chain, wallets, tmp_path, "list", "--refresh"),
    }
    codes = {name: run.returncode for name, run in runs.items()}
    assert codes == {
        "resources": 0,
        "templates": 0,
        "refused allocate": 1,
        "allocate": 0,
        "list --refresh": 0,
    }
    assert "FAKE OK" in runs["refused allocate"].stderr  # the refusal is shown, markup as text
    assert "lost" in runs["list --refresh"].stdout
    for name, run in runs.items():
        assert "Traceback" not in run.stderr, (name, run.stderr[-2000:])
        assert unprintable(run.stdout + run.stderr) == [], f"register.py {name} printed control characters"
    code, body = _json(_register(chain, wallets, tmp_path, "resources", "--json"))
    names = [m.get("gpu_model") for m in body["machines"]]
    assert code == 0 and any("\\x1b[2J" in (n or "") for n in names), names  # --json: escapes too


def _json(run: subprocess.CompletedProcess) -> tuple[int, dict]:
    return run.returncode, json.loads(run.stdout)
