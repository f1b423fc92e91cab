"""The ``world`` fixture: a real EVM in process with the real contracts (``evm_world``)."""

from __future__ import annotations

import pytest

pytest.importorskip("web3", reason="the collateral extra is not installed (pip install -e '.[dev]')")

from evm_world import World, make_world  # noqa: E402


@pytest.fixture
def world() -> World:
    return make_world()
