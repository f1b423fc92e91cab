"""The pm2 ecosystem files start the neurons with the project's environment, not a bare python3, and
take every setting from the environment and a git-ignored .env (nothing to edit in a tracked file):
node evaluates each config as pm2 would, and its command line is started for real."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("miner", "validator")
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node (pm2's runtime) is not installed")


def _app(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = f"console.log(JSON.stringify(require({str(ROOT / 'scripts' / 'pm2' / f'{name}.config.js')!r}).apps[0]))"
    return subprocess.run([NODE or "node", "-e", script], capture_output=True, text=True, env=env, timeout=30)


def _venv_like(tmp_path: Path) -> Path:
    """The venv running these tests (as in CI), else a directory laid out like one around this python."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    return venv


@needs_node
@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.slow
def test_ecosystem_command_line_runs_the_neuron_in_the_project_environment(name: str, tmp_path: Path) -> None:
    venv = _venv_like(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    settings = tmp_path / f"{name}.env"  # the operator's file, outside the checkout
    settings.write_text(f"BT_WALLET={name}-wallet\nBT_WALLET_HOTKEY=hot\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_"))}
    env.update(VIRTUAL_ENV=str(venv), HOME=str(home), COMPUTE_ENV_FILE=str(settings))
    app = json.loads(_app(name, env).stdout)
    assert app["interpreter"] == str(venv / "bin" / "python")  # not "python3"
    assert Path(app["cwd"]) == ROOT and app["script"] == f"neurons/{name}.py"
    assert app["args"] == f"--env_file {settings}"  # no wallet, network or address written in the config

    # Start the config's command line as pm2 would (interpreter script args, in cwd, with its env).
    command = [app["interpreter"], app["script"], *app["args"].split()]
    proc = subprocess.run(
        command, cwd=app["cwd"], env={**env, **app["env"]}, capture_output=True, text=True, timeout=120
    )
    # It imports everything and gets as far as the wallet named in the .env, which this empty HOME lacks.
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"wallet name='{name}-wallet' hotkey='hot' path='{home}/.bittensor/wallets'" in proc.stderr
    assert "btcli wallet create" in proc.stderr and "Traceback" not in proc.stderr
    help_run = subprocess.run(
        [*command[:2], "--help"], cwd=app["cwd"], env=env, capture_output=True, timeout=120
    )
    assert help_run.returncode == 0


@needs_node
def test_ecosystem_config_without_an_environment_says_how_to_make_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "COMPUTE_PYTHON")}
    if (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("this checkout has a .venv, which the config rightly uses")
    proc = _app("validator", env)
    assert proc.returncode != 0
    assert "python3 -m venv .venv" in proc.stderr and "COMPUTE_PYTHON" in proc.stderr
    explicit = _app("miner", {**env, "COMPUTE_PYTHON": "/opt/py/bin/python"})
    assert json.loads(explicit.stdout)["interpreter"] == "/opt/py/bin/python"


@needs_node
@pytest.mark.parametrize("name", CONFIGS)
def test_ecosystem_config_reads_the_checkouts_env_or_the_named_file(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_"))}
    env["COMPUTE_PYTHON"] = "/opt/py/bin/python"
    app = json.loads(_app(name, env).stdout)
    assert app["args"] == "" and Path(app["cwd"]) == ROOT  # the neuron reads ./.env from its cwd itself
    if not (ROOT / ".env").exists():
        assert "cp .env.example .env" in _app(name, env).stderr
    missing = _app(name, {**env, "COMPUTE_ENV_FILE": str(tmp_path / "none.env")})
    assert missing.returncode != 0 and "no such file" in missing.stderr


def test_no_tracked_file_holds_an_operators_settings() -> None:
    """The operator's file is git-ignored; the tracked configs carry no wallet, address or network."""
    ignored = subprocess.run(["git", "check-ignore", ".env"], cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout.strip() == ".env"
    for name in CONFIGS:
        text = (ROOT / "scripts" / "pm2" / f"{name}.config.js").read_text()
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
        assert not any(flag in code for flag in ("--wallet", "--subtensor", "--axon", "--netuid", "--miner."))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pm2") is None, reason="pm2 is not installed")
def test_under_real_pm2_info_lands_in_the_out_log_and_errors_in_the_error_log(
    tmp_path: Path, make_wallet
) -> None:
    """pm2 itself, in a PM2_HOME of its own, starts the miner config with a .env naming a wallet on a
    simulated chain where it is not registered: INFO lines until that error, which exits it."""
    make_wallet("pm2-miner")  # under tmp_path / "wallets"
    chain = tmp_path / "chain.db"
    subprocess.run([sys.executable, "-m", "compute", "chain", "create", str(chain)], cwd=ROOT, check=True)
    settings = tmp_path / "miner.env"
    settings.write_text(
        f"BT_WALLET=pm2-miner\nBT_WALLET_PATH={tmp_path / 'wallets'}\nBT_NETWORK=sim:{chain}\n"
        f"COMPUTE_MINER_BACKEND=embedded\nCOMPUTE_MINER_DATA_DIR={tmp_path / 'data'}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_"))}
    env.update(PM2_HOME=str(tmp_path / "pm2"), COMPUTE_ENV_FILE=str(settings), COMPUTE_PYTHON=sys.executable)
    pm2 = shutil.which("pm2") or "pm2"
    logs = tmp_path / "pm2" / "logs"
    try:
        subprocess.run(
            [pm2, "start", "scripts/pm2/miner.config.js"], cwd=ROOT, env=env, check=True, timeout=60
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "not registered" not in _read(logs / "compute-miner-error.log"):
            time.sleep(0.5)
    finally:
        subprocess.run([pm2, "kill"], env=env, capture_output=True, timeout=60)
    out, err = _read(logs / "compute-miner-out.log"), _read(logs / "compute-miner-error.log")
    assert "INFO    compute.chain.client: chain connected network=sim:" in out
    assert "ERROR   neurons.miner: hotkey" in err and "is not registered on netuid 27" in err
    assert " ERROR " not in out and " INFO " not in err


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
