"""The pm2 ecosystem files start the neurons with the project's environment, not a bare python3:
node evaluates each config as pm2 would, and its command line is started for real."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_"))}
    env.update(VIRTUAL_ENV=str(venv), HOME=str(home))
    app = json.loads(_app(name, env).stdout)
    assert app["interpreter"] == str(venv / "bin" / "python")  # not "python3"
    assert Path(app["cwd"]) == ROOT and app["script"] == f"neurons/{name}.py"

    # Start the config's command line as pm2 would (interpreter script args, in cwd, with its env).
    command = [app["interpreter"], app["script"], *app["args"].split()]
    proc = subprocess.run(
        command, cwd=app["cwd"], env={**env, **app["env"]}, capture_output=True, text=True, timeout=120
    )
    # It imports everything and gets as far as the operator's wallet, which this empty HOME lacks.
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"wallet name='{name}' hotkey='default' path='{home}/.bittensor/wallets'" in proc.stderr
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
