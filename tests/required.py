"""Skip a test a machine cannot run, unless CI says this machine must run it.

``.ci/run`` sets ``COMPUTE_REQUIRE_NETNS=1`` (and its siblings) where the tests' needs are installed,
so there a missing capability fails the run instead of passing it silently with a skip.
"""

from __future__ import annotations

import os

import pytest


def skip_unless_able(reason: str | None, env: str, what: str) -> None:
    """Nothing when ``reason`` is None; else fail where ``env`` is 1, skip (saying ``what`` needs it)
    elsewhere."""
    if reason is None:
        return
    if os.environ.get(env) == "1":
        pytest.fail(f"{env}=1 but {reason}")
    pytest.skip(f"{what}: {reason}")
