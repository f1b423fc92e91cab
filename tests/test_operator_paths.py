"""The README's operator paths (miner and validator, zero to running): every command line that can
run here runs, each one that needs a GPU host or the public chain is at least parsed by its real
parser, and only system installs are merely listed. A new README line fails until it is classified."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compute.localnet import _parser as localnet_parser
from compute.settings import load_dotenv, parse_miner
from compute.validator import parse_validator

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SECTION = "## From zero to running on a GPU host"
# Lines only listed: system packages, the network, multi-GB builds, following logs. CI runs
# `pip install -e .` through scripts/check_readme.py; the pm2 configs are evaluated below.
LISTED = ("sudo ", "git clone ", "pip install ", "docker build ", "pm2 logs ")


def path_commands(role: str) -> list[str]:
    section = README[README.index(SECTION) :]
    part = section[section.index(f"### {role}") :]
    block = re.search(r"```bash\n(.*?)```", part, re.S)
    assert block is not None, f"no bash block under ### {role}"
    return [line.strip() for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Shell:
    """Runs README lines with bash, HOME in a temp dir, `python`/`btcli` of this environment first."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.home.mkdir()
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        btcli = Path(sys.executable).parent / "btcli"
        btcli_path = str(btcli) if btcli.exists() else shutil.which("btcli")
        assert btcli_path, "btcli (shipped with bittensor) is not installed"
        for name, target in (("python", sys.executable), ("python3", sys.executable), ("btcli", btcli_path)):
            wrapper = bin_dir / name
            wrapper.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
            wrapper.chmod(0o755)
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_", "WANDB"))}
        self.env = {**keep, "HOME": str(self.home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run(self, line: str, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = line + "".join(f" {shlex.quote(arg)}" for arg in extra)
        return subprocess.run(
            ["bash", "-c", command],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def argv(self, line: str) -> list[str]:
        """The line's arguments after the script, with $HOME and ~ expanded as bash would."""
        expanded = line.replace("$HOME", str(self.home)).replace("~/", f"{self.home}/")
        return shlex.split(expanded)[2:]


def _btcli(shell: Shell, line: str, wallet: str) -> None:
    if line.startswith("btcli wallet create"):
        done = shell.run(line, "--no-password", "--json")  # a throwaway key; operators keep the prompt
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["coldkey"] == wallet
        assert (shell.home / ".bittensor" / "wallets" / wallet / "hotkeys" / "default").is_file()
    else:  # needs TAO on finney: check the command and every flag parse (an unknown flag exits 2)
        done = shell.run(line, "--help")
        assert done.returncode == 0, f"{line}: {done.stdout[-1500:]}{done.stderr[-1500:]}"


def _rehearse_miner(shell: Shell, line: str) -> None:
    """Start the README's simulated-chain miner line for real; stop it like Ctrl-C."""
    from compute.specs import collect_docker

    docker = collect_docker(5.0)
    if not docker.available:
        if os.environ.get("COMPUTE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"COMPUTE_REQUIRE_DOCKER=1 but {docker.error}")
        return
    # Here: a free API port and the CPU test image instead of 8091 and the CUDA image (last flag wins).
    extra = [
        "--axon.port",
        str(_free_port()),
        "--miner.base_image",
        "compute-base:cpu",
        "--axon.ip",
        "127.0.0.1",
    ]
    extra += ["--miner.data_dir", str(shell.home / "miner-data")]
    command = line + "".join(f" {shlex.quote(arg)}" for arg in extra)
    log = shell.home / "miner.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=ROOT, env=shell.env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 90
        while "serving on" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _dotenv(shell: Shell, line: str) -> None:
    """The operator's settings line, run in a stand-in checkout (never this checkout's own .env)."""
    assert line.endswith(">> .env"), line
    done = subprocess.run(["bash", "-c", line], cwd=shell.home, env=shell.env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _pm2(shell: Shell, role: str, line: str) -> None:
    config = ROOT / line.split()[-1]
    assert config.is_file(), f"{line}: no {config}"
    node = shutil.which("node")
    if node is not None:  # evaluated as pm2 would, with this environment as the project's
        settings = shell.home / ".env"  # what the README's settings line wrote
        env = {**shell.env, "COMPUTE_PYTHON": sys.executable, "COMPUTE_ENV_FILE": str(settings)}
        script = f"console.log(JSON.stringify(require({str(config)!r}).apps[0]))"
        app = json.loads(subprocess.run([node, "-e", script], env=env, capture_output=True, text=True).stdout)
        assert (ROOT / app["script"]).is_file() and app["interpreter"] == sys.executable
        # The neuron pm2 starts takes the README's settings from that file, none from the config.
        parse = parse_miner if role == "Miner" else parse_validator
        parsed = parse(shlex.split(app["args"]), env=load_dotenv(settings))
        assert parsed.common.wallet_name == role.lower() and parsed.common.network == "finney"
        if role == "Miner":
            assert parsed.public_ip == "203.0.113.10" and parsed.backend == "docker"


def _check(shell: Shell, role: str, line: str) -> str:
    """Run or parse one README line; returns how it was checked."""
    wallet = role.lower()
    if line.startswith(LISTED):
        return "listed"
    if line.startswith("python3 -m venv"):
        done = shell.run(
            line.replace(".venv", str(shell.home / "venv")).replace("-m venv ", "-m venv --without-pip ")
            + " && python -c 'import sys; assert sys.prefix != sys.base_prefix'"
        )
        assert done.returncode == 0, done.stderr
        return "ran"
    if line.startswith("btcli "):
        _btcli(shell, line, wallet)
        return "ran"
    if line.startswith("python -m compute chain "):
        done = shell.run(line)
        assert done.returncode == 0, done.stdout + done.stderr
        return "ran"
    if line.startswith("python -m compute localnet"):
        localnet_parser().parse_args(shlex.split(line)[4:])  # the README's demo command: CI runs it
        return "parsed"
    if line.startswith("python neurons/miner.py"):
        settings = parse_miner(shell.argv(line), env={})
        if settings.common.chain_target.startswith("sim:"):
            _rehearse_miner(shell, line)
            return "ran"
        assert settings.public_ip and settings.backend == "docker"
        return "parsed"
    if line.startswith("python neurons/validator.py"):
        parse_validator(shell.argv(line), env={})
        return "parsed"
    if line.startswith("printf ") and line.endswith(">> .env"):
        _dotenv(shell, line)
        return "ran"
    if line.startswith("pm2 start "):
        _pm2(shell, role, line)
        return "evaluated"
    pytest.fail(f"README {role} path line not checked by this test (classify it): {line}")


@pytest.mark.slow
@pytest.mark.parametrize("role", ["Miner", "Validator"])
def test_operator_path_from_zero_to_running(role: str, tmp_path: Path) -> None:
    shell = Shell(tmp_path)
    lines = path_commands(role)
    how = {line: _check(shell, role, line) for line in lines}
    assert sum(v != "listed" for v in how.values()) >= 6, how
    assert any(line.startswith("pm2 start") for line in lines)
