"""The README is the contract: every command-line flag of every entry point is documented there."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compute.__main__ import main as compute_main
from compute.operator import main as register_main
from compute.pog.__main__ import main as pog_main
from neurons.miner import main as miner_main
from neurons.validator import main as validator_main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_.-]*[a-z0-9]")

COMMANDS = {
    "neurons/miner.py": (miner_main, []),
    "neurons/validator.py": (validator_main, []),
    **{
        f"neurons/register.py {sub}": (register_main, [sub])
        for sub in (
            "resources",
            "templates",
            "allocate",
            "list",
            "extend",
            "deallocate",
            "exchange-key",
            "restart",
            "status",
            "interactive",
        )
    },
    **{
        f"python -m compute {cmd}": (compute_main, cmd.split())
        for cmd in (
            "localnet",
            "chain create",
            "chain register",
            "chain show",
            "chain weights",
            "bench-transport",
            "bench-allocation",
            "bench-validator",
            "dashboard",
            "bench-dashboard",
        )
    },
    "python -m compute.pog bench": (pog_main, ["bench"]),
    "python -m compute.pog worker": (pog_main, ["worker"]),
}


def help_flags(main, prefix: list[str]) -> set[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main([*prefix, "--help"], **({"stdout": out} if main is register_main else {}))
        except SystemExit as exited:
            code = exited.code
    assert code in (0, None)
    return set(FLAG.findall(out.getvalue())) - {"--help"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_of_the_command_is_in_the_readme(command: str) -> None:
    main, prefix = COMMANDS[command]
    flags = help_flags(main, prefix)
    assert flags, f"{command} --help listed no flags"
    missing = sorted(flag for flag in flags if flag not in README)
    assert not missing, f"{command}: flags missing from README.md: {missing}"


def test_readme_names_both_commands() -> None:
    assert "python -m compute localnet --miners 3 --rounds 1" in README
    assert "python -m pytest -q" in README


# ---------------------------------------------------------------- the two commands, as CI runs them

CHECK = Path(__file__).resolve().parents[1] / "scripts" / "check_readme.py"


def _fake_repo(tmp_path: Path, demo: str, tests: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text(
        f"# x\n\n## The two commands\n\n```bash\n# 1. demo\n{demo}\n\n# 2. tests\n{tests}\n```\n"
    )
    return repo


def _check(repo: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), "--repo", str(repo), "--venv", str(tmp_path / "venv")],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_check_readme_reads_the_two_commands_from_this_readme() -> None:
    proc = subprocess.run([sys.executable, str(CHECK), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    section = README[README.index("## The two commands") :]
    block = section[section.index("```bash") : section.index("```", section.index("```bash") + 3)]
    commands = [line for line in block.splitlines()[1:] if line.strip() and not line.startswith("#")]
    assert commands == [
        "pip install -e . && python -m compute localnet --miners 3 --rounds 1",
        'pip install -e ".[dev]" && python -m pytest -q',
    ]
    # The dev extra carries the exact torch pin that resolves to CI's local CPU wheel.
    setup = (CHECK.parents[1] / "setup.py").read_text()
    assert '"torch==2.13.0"' in setup
    # CI installs no Python package itself: it runs the README's commands through the script.
    ci = (CHECK.parents[1] / ".ci" / "run").read_text()
    assert "pip install" not in ci and "scripts/check_readme.py" in ci


@pytest.mark.slow
def test_check_readme_runs_commands_in_a_fresh_venv_and_fails_on_no_tests(tmp_path: Path) -> None:
    in_venv = "python -c \"import os, sys; assert sys.prefix != sys.base_prefix; assert 'PYTHONPATH' not in os.environ\""
    repo = _fake_repo(tmp_path, in_venv + " && echo demo-ok", "echo '==== no tests ran in 0.01s ===='")
    proc = _check(repo, tmp_path)
    assert "demo-ok" in proc.stdout
    assert proc.returncode == 1 and "ran no test" in proc.stderr

    (repo / "README.md").unlink()
    repo.rmdir()
    repo = _fake_repo(tmp_path, "false", "echo '3 passed in 0.1s'")
    proc = _check(repo, tmp_path)
    assert proc.returncode == 1 and "demo command failed" in proc.stderr

    (repo / "README.md").unlink()
    repo.rmdir()
    repo = _fake_repo(tmp_path, in_venv, "echo '3 passed, 1 skipped in 0.1s'")
    proc = _check(repo, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_check_readme_refuses_a_readme_without_two_commands(tmp_path: Path) -> None:
    repo = _fake_repo(tmp_path, "echo one", "")
    proc = _check(repo, tmp_path)
    assert proc.returncode == 2 and "exactly two commands" in proc.stderr
    assert not (tmp_path / "venv").exists()  # refused before creating anything
