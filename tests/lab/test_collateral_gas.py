"""``python -m compute bench collateral-gas``: gas per collateral operation on the in-process EVM."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("web3", reason="the collateral extra (web3, eth-tester) is not installed")


@pytest.mark.slow
def test_the_gas_benchmark_prints_every_operation(capsys) -> None:
    from compute.__main__ import main

    assert main(["bench", "collateral-gas", "--json", "--bench.validators", "3"]) == 0
    gas = json.loads(capsys.readouterr().out)["gas"]
    for op in (
        "deposit_first",
        "deposit_topup",
        "attest_first",
        "attest_that_slashes",
        "claim",
        "reclaim_request",
        "reclaim_finalize",
    ):
        assert 20_000 < gas[op] < 2_000_000, op
    assert gas["attesters_at_quorum"] == 2
