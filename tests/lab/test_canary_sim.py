"""``python -m compute bench canary-sim``: what a miner keeps by refusing renters, and what canaries cost."""

from __future__ import annotations

import json

import pytest

from compute.lab.sim.canary import main as canary_sim
from compute.validator.rentals.shapes import RENTER_ASKS


def test_canary_sim_prints_what_a_renter_refusing_miner_keeps(capsys) -> None:
    assert canary_sim(["--canaries", "20", "--renters", "2000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = {(r["strategy"], r["canaries"]): r for r in result["strategies"]}
    aware = "canary-aware (validators + old canary shape)"
    assert rows[(aware, "old")]["availability"] == 1.0  # the first finding: the old canary is served
    assert rows[(aware, "new")]["availability"] < 0.6  # the operator identity's canaries are refused
    chain = "canary-aware (validators' coldkeys on chain + old canary shape)"
    assert rows[(chain, "in turn")]["availability"] == 1.0  # an operator key on the validator's coldkey
    assert rows[(chain, "new")]["availability"] == pytest.approx(1 / 21, abs=1e-3)  # one of its own
    assert rows[("refuses every renter", "new")]["availability"] == pytest.approx(1 / 21, abs=1e-3)
    assert rows[("honest", "new")] == {
        **rows[("honest", "new")],
        "availability": 1.0,
        "real_renters_served": 1.0,
    }
    for row in result["load"]:  # tests and canaries together stay within the budget
        assert row["total_share"] <= row["budget"] + 1e-9 and row["canaries_share"] > 0
    assert result["asks"]["term_under_15_min_share"] == 0
    assert RENTER_ASKS.template_share == 0.25
