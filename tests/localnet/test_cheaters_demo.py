"""``localnet --cheaters``: the scoreboard of a network with one honest miner, a miner that refuses
every rental while claiming "rented", two hotkeys handing out one box, a canary-aware miner that
turns real renters away, a self-renter whose own coldkey "rents" its GPU, three sybils serialising
one device, one device listed as three hosts, and a hit-and-run miner whose device leaves after its
first test."""

from __future__ import annotations

from pathlib import Path

import pytest
from localnetkit import localnet_summary


@pytest.mark.slow
def test_scoreboard_credits_the_honest_miner_and_neither_cheat(tmp_path: Path) -> None:
    args = ("--miners", "1", "--rounds", "2", "--cheaters", "--timeout", "400")
    miners = {m["name"]: m for m in localnet_summary(tmp_path / "net", *args, timeout=480)["miners"]}
    assert miners["miner1"]["verdict"] == "verified" and miners["miner1"]["weight"] > 0
    assert miners["refuser"]["verdict"] == "refused rentals, no verified lease"
    assert miners["refuser"]["score"] == 0 and miners["refuser"]["weight"] == 0
    assert miners["refuser"]["availability"] < 1 and miners["miner1"]["availability"] == 1  # canaries
    pair = sorted((miners["box-a"], miners["box-b"]), key=lambda m: m["weight"])
    assert pair[0]["verdict"].startswith("shared device: same machine as uid")
    assert pair[0]["score"] == 0 and pair[0]["weight"] == 0  # one box earns once ...
    assert (
        pair[1]["verdict"] == "verified (device credited once)" and pair[1]["weight"] > 0
    )  # ... not zero times
    aware = miners["canary-aware"]  # the operator identity's canaries (a coldkey of its own): refused
    assert aware["verdict"] == "verified" and aware["availability"] <= 0.5
    renter = miners["self-renter"]  # its own coldkey's 30-day lease excuses nothing
    assert renter["verdict"] == "self-rental: its own coldkey's lease is no rental"
    assert renter["score"] == 0 and renter["weight"] == 0
    sybils = [miners[f"sybil-{x}"] for x in "abc"]  # one device: at most one seat per window
    device = max(m["capacity"] for m in sybils)
    assert device > 0 and sum(m["credit"] for m in sybils) <= device * 1.05
    assert sum(m["verdict"] == "absent at the lockstep window's moment" for m in sybils) >= 2
    assert miners["hosts-dup"]["credited_hosts"] <= 1  # one device, three hosts: credited as one
    hit = miners["hit-and-run"]  # there at the first of two presence checks (the rounds) only
    assert hit["presence"] == pytest.approx(0.5) and hit["credit"] <= hit["capacity"] * 0.5 * 1.05
    assert miners["miner1"]["presence"] == 1.0
