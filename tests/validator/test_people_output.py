"""What people read from a validator under pm2 or any pipe: whole tables, a legend, and progress."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compute.validator.report.progress import RoundProgress

ROOT = Path(__file__).resolve().parents[2]
REASON = "memory proof: row 17 of gpu 0 does not match the committed root (tolerance 1e-3)"
PRINT_TABLE = f"""
from compute.store import PogResult
from compute.validator.report.table import print_round_table, round_table
ok = PogResult(1, 7, "5HonestMinerHotkeyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", True, 2.5, models=("H100 SXM",) * 8,
               tflops_fp16=640.0, tflops_fp32=51.0, gpu_count=8, mem_gbs=2900.0, mem_proven_gb=70.0,
               sustained_ratio=0.54, sustained_factor=0.6, scaling_efficiency=0.97, credited_gpus=8)
bad = PogResult(1, 9, "5CheaterHotkeyBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", False, 0.0, reasons=({REASON!r},))
print_round_table(round_table(1, [ok, bad], {{7: 2.5, 9: 0.0}}, {{7: 1.0, 9: 0.0}}))
"""


@pytest.mark.slow
def test_round_table_is_not_cut_at_80_columns_off_a_terminal() -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # as under pm2: a pipe, no COLUMNS
    proc = subprocess.run(
        [sys.executable, "-c", PRINT_TABLE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b[" not in out  # no terminal control codes in log files
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 5}
    assert "8x H100 SXM" in rows["7"] and "0.54 throttled ×0.60" in rows["7"]
    assert "1.0000" in rows["7"]  # the weight column made it to the end of the line
    assert REASON[:60] in rows["9"]  # the verdict is whole on its one line, not wrapped or cut
    assert max(len(line) for line in out.splitlines()) > 80
    legend = " ".join(out.split())
    assert "the GPU score is multiplied by F" in legend and "above 1: sped up while warming" in legend


def test_progress_off_a_terminal_is_periodic_log_lines(caplog) -> None:
    async def round_of_three() -> RoundProgress:
        progress = RoundProgress(4, 3, every_s=0.05, stream=io.StringIO())
        beat = asyncio.create_task(progress.heartbeat())
        progress.advance(True)
        await asyncio.sleep(0.12)
        progress.advance(False)
        progress.advance(True)
        beat.cancel()
        progress.close()
        return progress

    with caplog.at_level(logging.INFO, logger="compute.validator.report.progress"):
        progress = asyncio.run(round_of_three())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) >= 2  # at least one periodic line while it ran, and the closing one
    assert lines[0].startswith("round=4 progress 1/3 miners done (1 verified, 0 failed)")
    assert lines[-1].startswith("round=4 progress 3/3 miners done (2 verified, 1 failed)")
    assert (progress.done, progress.verified, progress.failed) == (3, 2, 1)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_a_bar_and_no_periodic_lines(caplog) -> None:
    screen = _Tty()

    async def run() -> None:
        progress = RoundProgress(2, 2, every_s=0.01, stream=screen)
        await asyncio.wait_for(progress.heartbeat(), 1)  # returns at once: the bar refreshes itself
        progress.advance(True)
        progress.advance(True)
        progress.close()

    with caplog.at_level(logging.INFO, logger="compute.validator.report.progress"):
        asyncio.run(run())
    assert "round 2" in screen.getvalue() and "2/2" in screen.getvalue()
    assert [r.getMessage()[:30] for r in caplog.records] == ["round=2 progress 2/2 miners do"]
