"""``bench distance --far-gpu``, tiny: honest far GPU seats whose delay rises after the pings pass,
one device serving two chains never does, and a rise beyond what physics allows is seen."""

from __future__ import annotations

import json

from compute.lab.bench.distance import main


def run(capsys, *extra: str) -> tuple[int, dict]:
    code = main(["--far-gpu", "--models", "L4,H100 SXM", "--windows", "3", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_an_honest_far_gpu_seat_passes_every_window_and_two_chains_on_one_device_never_do(capsys) -> None:
    code, report = run(capsys)
    assert code == 0 and report["honest_failed"] == 0 and report["cheats_credited_twice"] == 0, report
    rows = {row["model"]: row for row in report["far_gpu"]}
    assert rows["H100 SXM"]["sustained_step_s"] == 1.0  # its bound covers a second at 150 ms
    assert 0.8 < rows["L4"]["sustained_step_s"] < 1.0  # the L4's does not: the largest step it allows
    assert all(row["passes"] == 256 and row["regenerating_credited"] == 0 for row in rows.values())


def test_a_rise_beyond_the_allowance_fails_the_honest_seat(capsys) -> None:
    """The control: the bench can fail; a 1.6 s rise is more than a GPU seat's slack (1.3 s)."""
    code, report = run(capsys, "--step", "1.6")
    assert code == 1 and all(row["transient_failed"] == 3 for row in report["far_gpu"]), report
