"""Round step timeout from the chain's real block time; the weights loop's idle message."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from validator_helpers import validator_context

from compute.chain import ChainUnavailable, connect
from compute.store import ValidatorStore
from compute.validator import WeightsLoop, chain_block_seconds, measure_block_seconds, round_step_timeout


class _TickingChain:
    """A chain whose height advances every ``seconds`` of wall time (a block() only)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, time.monotonic()

    def block(self) -> int:
        return 100 + int((time.monotonic() - self.start) / self.seconds)


class _ReportingChain(_TickingChain):
    def __init__(self, seconds: float, reported: float | Exception) -> None:
        super().__init__(seconds)
        self.reported = reported

    def block_time(self) -> float:
        if isinstance(self.reported, Exception):
            raise self.reported
        return self.reported


def test_step_timeout_follows_block_time_but_never_drops_below_two_miner_timeouts() -> None:
    assert round_step_timeout(60, 100, 12.0) == pytest.approx(1080)
    assert round_step_timeout(60, 100, 0.25) == 120  # a fast local chain: the lower bound holds
    assert round_step_timeout(60, 100, 6.0) == pytest.approx(540)


async def test_block_time_is_measured_between_two_height_changes() -> None:
    chain = _TickingChain(0.1)

    async def block() -> int:
        return chain.block()

    measured = await measure_block_seconds(block, max_wait=5)
    assert measured == pytest.approx(0.1, abs=0.05)


async def test_a_stalled_chain_gives_no_measurement_and_the_default_is_used() -> None:
    async def block() -> int:
        return 7

    assert await measure_block_seconds(block, max_wait=0.3) is None
    stalled = _TickingChain(3600.0)
    assert await chain_block_seconds(stalled, max_wait=0.3) == 12.0


async def test_reported_block_time_wins_and_a_failing_report_falls_back_to_measuring() -> None:
    assert await chain_block_seconds(_ReportingChain(0.1, 6.0)) == 6.0
    broken = _ReportingChain(0.1, ChainUnavailable("no answer"))
    # measured by polling the wall clock: on a loaded 2-core machine a change seen late shortens or
    # stretches one interval; far from both the 12 s default and the broken report either way
    assert 0.02 <= await chain_block_seconds(broken, max_wait=5) <= 0.3
    assert 0.02 <= await chain_block_seconds(_ReportingChain(0.1, 0.0), max_wait=5) <= 0.3


async def test_simulated_chain_block_time_is_found(sim_chain) -> None:
    path, _state = sim_chain  # block_time=0.2 s
    chain = connect(f"sim:{path}", 27)
    try:
        seconds = await chain_block_seconds(chain, max_wait=10)
    finally:
        chain.close()
    assert 0.1 <= seconds <= 0.3  # measured 0.2, or the SDK's fast-block 0.25 where reported


async def test_weights_loop_says_it_is_idle_once_at_info_then_at_debug(tmp_path: Path, caplog) -> None:
    store = ValidatorStore(tmp_path / "v.db")
    loop = WeightsLoop(validator_context(None, store, None, hotkey="5V"), None, interval_blocks=1)
    caplog.set_level(logging.DEBUG, logger="compute.validator.round.loop")
    try:
        for block in range(3):
            await loop.run_step(block)
    finally:
        store.close()
    idle = [r.levelno for r in caplog.records if "no finished round yet" in r.getMessage()]
    assert idle == [logging.INFO, logging.DEBUG, logging.DEBUG]
