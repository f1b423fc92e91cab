"""Run ``python -m compute localnet`` for real, as the README's users do (shared by the localnet tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_localnet(workdir: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """The demo command with ``args`` in a fresh ``workdir``, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "compute", "localnet", *args, "--workdir", str(workdir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def localnet_summary(workdir: Path, *args: str, timeout: float = 240) -> dict:
    """The ``--json`` summary of a demo run that must succeed."""
    proc = run_localnet(workdir, *args, "--json", timeout=timeout)
    try:
        problems = json.loads(proc.stdout).get("problems")
    except ValueError:
        problems = None
    assert proc.returncode == 0, f"problems: {problems}\n{proc.stderr[-3000:]}"
    assert "demo took" not in proc.stdout  # --json prints only JSON on stdout
    return json.loads(proc.stdout)
