"""``localnet --cheaters``: the scoreboard of a network with one honest miner, a miner that refuses
every rental while claiming "rented", two hotkeys handing out one box, a canary-aware miner that
turns real renters away and a self-renter whose own coldkey "rents" its GPU."""

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
    aware = miners["canary-aware"]  # met both canary signers: refused the operator key's canary
    assert aware["verdict"] == "verified" and aware["availability"] == pytest.approx(2 / 3)
    renter = miners["self-renter"]  # its own coldkey's 30-day lease excuses nothing
    assert renter["verdict"] == "self-rental: its own coldkey's lease is no rental"
    assert renter["score"] == 0 and renter["weight"] == 0
