"""The chain reports its own block time, so the validator converts blocks to seconds without guessing."""

from __future__ import annotations

from pathlib import Path

import pytest

from compute.chain import connect
from compute.chain.sim import SimChainState


@pytest.mark.parametrize("configured", [1.0, 3.0, 12.0])
def test_block_time_is_what_the_sim_chain_was_created_with(tmp_path: Path, configured: float) -> None:
    path = tmp_path / "chain.db"
    SimChainState.create(path, netuid=27, block_time=configured)
    with connect(f"sim:{path}", 27) as chain:
        assert chain.block_time() == pytest.approx(configured)
