"""kill -9 at every durable step of two rounds, restart, and find each round counted exactly once."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).with_name("crash_driver.py")
REPO = Path(__file__).resolve().parents[2]
EXPECTED = {0: 7.5, 1: 3.0, 2: 1.0}  # EMA(0.5) of (10,10), (0,6), (4,0) from 0
PAUSES = 10  # 3 results + inside + finish, per round


def _start(db: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(DRIVER), str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _run_until_killed(db: Path, kill_at: int) -> str:
    proc = _start(db)
    try:
        for n in range(kill_at + 1):
            line = proc.stdout.readline().strip()
            if n == kill_at:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                return line
            proc.stdin.write("\n")
            proc.stdin.flush()
    finally:
        proc.kill()
        proc.wait(10)
    raise AssertionError("unreachable")


def _run_to_end(db: Path) -> None:
    proc = _start(db)
    out, _ = proc.communicate("\n" * 50, timeout=60)
    assert proc.returncode == 0, out
    assert out.strip().endswith("done"), out


def _state(db: Path) -> tuple[dict[int, float], int, int, int]:
    con = sqlite3.connect(db)
    try:
        scores = {uid: round(score, 9) for uid, score in con.execute("SELECT uid, score FROM scores")}
        results = con.execute("SELECT COUNT(*) FROM pog_results").fetchone()[0]
        updates = con.execute("SELECT COUNT(*) FROM score_updates").fetchone()[0]
        rounds = con.execute("SELECT COUNT(*) FROM rounds").fetchone()[0]
    finally:
        con.close()
    return scores, results, updates, rounds


def test_uninterrupted_run_gives_expected_scores(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    _run_to_end(db)
    assert _state(db) == (EXPECTED, 6, 6, 2)


@pytest.mark.parametrize("kill_at", range(PAUSES))
def test_kill_9_then_restart_loses_nothing_and_counts_nothing_twice(tmp_path: Path, kill_at: int) -> None:
    db = tmp_path / "v.db"
    tag = _run_until_killed(db, kill_at)
    assert tag.startswith(("step", "inside")), tag
    _run_to_end(db)
    assert _state(db) == (EXPECTED, 6, 6, 2)


def test_two_kills_in_a_row_still_converge(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    assert _run_until_killed(db, 3) == "inside"
    assert _run_until_killed(db, 0) == "inside"  # resumes round 1: no results left, straight to closing
    _run_to_end(db)
    assert _state(db) == (EXPECTED, 6, 6, 2)
