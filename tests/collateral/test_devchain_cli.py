"""``python -m compute collateral devchain``: a local EVM with the contracts, served until stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("web3", reason="the collateral extra is not installed (pip install -e '.[dev]')")

from web3 import Web3  # noqa: E402

from compute.collateral.chain import CollateralClient  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_devchain_serves_the_deployed_contracts_until_interrupted() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "compute", "collateral", "devchain", "--devchain.rate", "2", "--json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        w3 = Web3(Web3.HTTPProvider(info["rpc"]))
        assert len(w3.eth.get_code(w3.to_checksum_address(info["collateral"]))) > 1000
        client = CollateralClient(w3, info["collateral"])
        assert client.required(3) == 6 * 10**18  # --devchain.rate 2 TAO per GPU-day
        assert info["faucet_key"].startswith("0x") and "never use" in info["note"]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
