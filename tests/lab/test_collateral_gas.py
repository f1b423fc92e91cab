"""``python -m compute bench collateral-gas``: gas per collateral operation on the in-process EVM."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("web3", reason="the collateral extra (web3, eth-tester) is not installed")


@pytest.mark.slow
def test_the_gas_benchmark_prints_every_operation_and_none_costs_half_again_its_baseline(capsys) -> None:
    from compute.__main__ import main

    assert main(["bench", "collateral-gas", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    gas = result["gas"]
    for op in (
        "deposit_first",
        "deposit_topup",
        "attest_first",
        "attest_more",
        "attest_that_slashes",
        "claim",
        "claim_bond",
        "reclaim_request",
        "reclaim_finalize",
        "attest_reopens",
        "expire",
    ):
        assert 20_000 < gas[op] < 2_000_000, op
    assert gas["attesters_at_quorum"] == 3
    assert set(result["ratio"]) == set(result["baseline"])  # every operation measured before is measured now
    assert all(ratio <= 1.5 for ratio in result["ratio"].values()), result["ratio"]
