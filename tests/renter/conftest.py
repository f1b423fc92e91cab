"""The operator tests' local subnet (a real miner app on a simulated chain), reused for the SDK.

``tests/operator/conftest.py`` builds it; it is loaded here under another module name so that both
directories can be collected in one run."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_OPERATOR = Path(__file__).resolve().parents[1] / "operator"
sys.path.insert(0, str(_OPERATOR))  # its helpers (operator_helpers, flow) import each other by name
_spec = importlib.util.spec_from_file_location("operator_subnet", _OPERATOR / "conftest.py")
assert _spec is not None and _spec.loader is not None
subnetkit = importlib.util.module_from_spec(_spec)
sys.modules["operator_subnet"] = subnetkit
_spec.loader.exec_module(subnetkit)


@pytest.fixture
def subnet(tmp_path: Path, make_wallet) -> Iterator:
    net, stop = subnetkit.start_subnet(tmp_path, make_wallet, "embedded", [])
    yield net
    stop()


@pytest.fixture
def docker_subnet(tmp_path: Path, make_wallet) -> Iterator:
    reason = subnetkit.docker_skip_reason()
    if reason:
        pytest.skip(reason)
    net, stop = subnetkit.start_subnet(tmp_path, make_wallet, "docker", [])
    yield net
    stop()
