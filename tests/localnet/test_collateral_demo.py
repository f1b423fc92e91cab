"""``localnet --collateral``: the real processes play a failed rental, and the renter is made whole.

Two validators (both needed: together they hold the stake quorum and give the two probes), one
honest miner and the ``killer`` that stops a renter's lease seconds after it started. The renter
rents, reports and claims with ``neurons/register.py``; the validators' desks probe, assemble,
attest and slash on the local EVM. The demo itself fails unless the renter is compensated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("web3", reason="the collateral extra is not installed (pip install -e '.[dev]')")

from localnetkit import localnet_summary  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_killer_is_slashed_by_the_quorum_and_the_renter_claims(tmp_path: Path) -> None:
    args = ("--miners", "1", "--validators", "2", "--collateral", "--timeout", "600")
    summary = localnet_summary(tmp_path / "net", *args, timeout=840)
    story = summary["collateral"]
    assert summary["ok"] and summary["problems"] == []
    assert story["reported"] and story["owed_wei"] == 10**18  # one day of rent of the killed lease
    assert story["claimed_wei"] == story["owed_wei"] and story["renter_gain_wei"] > 0.99 * 10**18
    deposits = story["deposits"]
    assert deposits["killer"]["deposit_tao"] == 0 and deposits["killer"]["slashes"] == 1
    assert len(story["evidence"]) == 1  # one dead lease, one evidence document, one slash
    assert deposits["killer"]["factor"] == 0.5 and deposits["miner1"]["factor"] == 1.0
    miners = {m["name"]: m for m in summary["miners"]}
    assert miners["miner1"]["weight"] > miners["killer"]["weight"]  # same proofs, no collateral left
