"""The README's two commands, as CI runs them (``scripts/check_readme.py``); every command and flag: docs/cli.md (tests/test_cli_docs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


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
