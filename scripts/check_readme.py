#!/usr/bin/env python3
"""Run the README's two commands, exactly as written, in a fresh virtual environment.

The README promises a newcomer two commands: one sets up and runs the local demo, one runs the
tests. This script is how CI keeps that promise honest: it reads both commands from the fenced
block under "## The two commands" (never a copy of them), creates a new virtual environment with
nothing installed, puts it first on PATH (as ``source .venv/bin/activate`` would), runs each
command with bash from the repository root, and fails if either fails or if the test command ran
no test. Nothing is installed here that the README's commands would not install themselves.

Usage: python3 scripts/check_readme.py [--venv DIR] [--only demo|tests] [--repo DIR]
Exit: 0 both passed; 1 a command failed or ran no test; 2 the README has no two commands.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECTION = "## The two commands"
PASSED = re.compile(r"\b(\d+) passed\b")


class ReadmeError(Exception):
    """The README does not hold the two commands where this script looks for them."""


def readme_commands(readme: str) -> tuple[str, str]:
    """The (demo, tests) commands: the non-comment lines of the first bash block of the section."""
    start = readme.find(SECTION)
    if start < 0:
        raise ReadmeError(f"README.md has no '{SECTION}' section")
    block = re.search(r"```bash\n(.*?)```", readme[start:], re.S)
    if block is None:
        raise ReadmeError(f"'{SECTION}' has no ```bash block")
    commands: list[str] = []
    pending = ""
    for raw in block.group(1).splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip() + " "
            continue
        commands.append(pending)
        pending = ""
    if len(commands) != 2:
        raise ReadmeError(f"'{SECTION}' must hold exactly two commands, found {len(commands)}: {commands}")
    return commands[0], commands[1]


def fresh_venv(path: Path) -> dict[str, str]:
    """Create an empty virtual environment at ``path`` and the environment of an activated shell."""
    if path.exists():
        shutil.rmtree(path)
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env["VIRTUAL_ENV"] = str(path)
    env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_command(name: str, command: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run one README command with bash in the repository root; stream and keep its output."""
    print(f"check_readme: [{name}] $ {command}", flush=True)
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    code = proc.wait()
    print(f"check_readme: [{name}] exit {code} after {time.monotonic() - started:.0f} s", flush=True)
    return code, "".join(lines)


def tests_ran(output: str) -> int:
    """How many tests pytest reported as passed in its closing line (0 when none or no line)."""
    found = PASSED.findall(output[-4000:])
    return int(found[-1]) if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=REPO / ".venv-readme", help="where the venv goes")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose README.md is run")
    parser.add_argument("--only", choices=["demo", "tests"], help="run only one of the two commands")
    args = parser.parse_args(argv)
    try:
        demo, tests = readme_commands((args.repo / "README.md").read_text(encoding="utf-8"))
    except ReadmeError as exc:
        print(f"check_readme: {exc}", file=sys.stderr)
        return 2
    env = fresh_venv(args.venv.resolve())
    print(f"check_readme: fresh virtual environment {args.venv}", flush=True)
    if args.only in (None, "demo"):
        code, _ = run_command("demo", demo, env, args.repo)
        if code != 0:
            print(f"check_readme: the README's demo command failed (exit {code})", file=sys.stderr)
            return 1
    if args.only in (None, "tests"):
        code, output = run_command("tests", tests, env, args.repo)
        if code != 0:
            print(f"check_readme: the README's test command failed (exit {code})", file=sys.stderr)
            return 1
        if tests_ran(output) == 0:
            print("check_readme: the README's test command ran no test", file=sys.stderr)
            return 1
    print("check_readme: the README's commands pass as written", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
