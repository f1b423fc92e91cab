"""A challenge names the generator version: a worker of another version refuses it by name."""

from __future__ import annotations

import pydantic
import pytest

from compute.pog.challenge import new_challenge
from compute.pog.generator import GEN_VERSION
from compute.pog.wire import Challenge


def test_challenge_version_is_the_generator_version() -> None:
    challenge = new_challenge("fp16", 64, 128, 64, 1)
    assert GEN_VERSION == b"compute-pog-gen/%d" % challenge.version


def test_a_version_1_challenge_is_refused_by_name() -> None:
    data = new_challenge("fp16", 64, 128, 64, 1).model_dump()
    data["version"] = 1
    with pytest.raises(pydantic.ValidationError, match="version"):
        Challenge.model_validate(data)
