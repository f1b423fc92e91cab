"""Collateral is optional: without the ``collateral`` extra (web3, eth-tester) every entry point
still imports and runs as before, and asking for collateral says which extra to install.

Each check runs in a fresh interpreter where ``web3`` and ``eth_tester`` cannot be imported (as in
the README's ``pip install -e .``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCK = "import sys\nfor name in ('web3', 'eth_tester'):\n    sys.modules[name] = None\n"


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + code], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "module",
    ["neurons.validator", "neurons.miner", "compute.operator.cli", "compute.localnet", "compute.__main__"],
)
@pytest.mark.slow
def test_entry_points_import_without_web3(module: str) -> None:
    done = run(f"import {module}")
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_asking_for_collateral_without_the_extra_names_it() -> None:
    code = (
        "from pathlib import Path\n"
        "from compute.collateral import CollateralError\n"
        "from compute.collateral.settings import CollateralSettings\n"
        "from compute.validator.collateral.wiring import build_collateral\n"
        "settings = CollateralSettings(rpc='http://127.0.0.1:1', address='0x' + 'ab' * 20)\n"
        "try:\n"
        "    build_collateral(settings, hotkey=None, wallet_name='w', wallet_path=Path('.'), data_dir=Path('.'),"
        " chain=None, store=None)\n"
        "except CollateralError as error:\n"
        "    print(error)\n"
    )
    done = run(code)
    assert done.returncode == 0 and "pip install -e '.[collateral]'" in done.stdout, done.stderr[-2000:]
