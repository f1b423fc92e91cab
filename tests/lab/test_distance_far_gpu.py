"""``bench distance --far-gpu``, tiny: honest far GPU seats whose delay rises after the pings pass,
one device serving two chains never does, and a rise beyond what physics allows is seen."""

from __future__ import annotations

import json

import pytest

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


@pytest.mark.slow
def test_an_honest_far_seat_end_to_end_is_present_while_its_way_back_rises_after_the_pings(capsys) -> None:
    """``--far-e2e``: the real capacity proof and presence checks of an honest miner on the emulated
    device at 70 % of its table, its SSH through the rising proxy: a transient and a sustained 1 s
    rise, both inside the chain and after the pings, both windows present (under a GPU seat's slack).

    Under load a rise can land after a window's chain ended (a slow slow-lane run: 1 of 2 risen,
    both present): such a run did not play the scenario, so it is run again, at most three times;
    an absent honest window in any run fails at once."""
    for _ in range(3):
        code = main(["--far-e2e", "2", "--json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 0 and report["failed"] == 0, report
        if report["risen_windows"] == 2:
            break
    assert report["risen_windows"] == 2 and report["rtt_before_s_max"] < 0.25, report
    assert report["rtt_after_s"][1] > 1.0  # the sustained rise: seen by the pings after the chain
