"""The validator's collaborators travel as one object: the loops take a ``ValidatorContext``, a
miner's test and its proofs take the check. These tests hold the signatures short, so loose
arguments cannot creep back one at a time."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
from validator_helpers import validator_context

from compute.validator import PresenceLoop, RoundLoop, WeightsLoop, check_miner
from compute.validator.proofs.depth import prove_memory
from compute.validator.proofs.depth_step import prove_depth
from compute.validator.proofs.gemm import prove_gemm

MOST_LOOP_ARGUMENTS = 10


def arguments(function: Callable) -> list[str]:
    """Every parameter of ``function`` but ``self``."""
    return [name for name in inspect.signature(function).parameters if name != "self"]


@pytest.mark.parametrize("loop", [RoundLoop, PresenceLoop, WeightsLoop])
def test_each_loop_takes_the_context_first_and_at_most_ten_arguments(loop: type) -> None:
    names = arguments(loop.__init__)
    assert names[0] == "ctx", names
    assert len(names) <= MOST_LOOP_ARGUMENTS, f"{loop.__name__} takes {len(names)}: {names}"


def test_a_miner_test_is_one_check_and_the_rounds_deadline() -> None:
    assert arguments(check_miner) == ["check", "deadline"]


@pytest.mark.parametrize("proof", [prove_memory, prove_gemm, prove_depth])
def test_each_proof_step_takes_the_check_first(proof: Callable) -> None:
    names = arguments(proof)
    assert names[:2] == ["check", "session"], names
    assert not {"params", "table", "depth", "timeout", "verify_workers", "share"} & set(names), names


def test_loops_built_from_one_context_share_its_collaborators() -> None:
    ctx = validator_context(None, None, None, hotkey="5V")
    rounds = RoundLoop(ctx, interval_blocks=1, concurrency=1, step_timeout=60)
    presence = PresenceLoop(ctx, presence_s=10.0, presence_budget=0.02)
    assert rounds.ctx is presence.ctx  # one timed lock, one oversight, one store
    assert ctx.timed_lock is not validator_context(None, None, None, hotkey="5V").timed_lock  # per validator
