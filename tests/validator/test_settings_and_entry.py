"""Validator flags and the entry point: a real process runs one round and sets weights."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from validator_helpers import register_and_serve

from compute.chain import connect
from compute.settings import SettingsError
from compute.validator import WandbLogger, parse_validator

REPO = Path(__file__).resolve().parents[2]


def test_flags_override_environment_which_overrides_defaults() -> None:
    env = {"COMPUTE_VALIDATOR_CONCURRENCY": "3", "COMPUTE_VALIDATOR_POG_N": "2048"}
    s = parse_validator(
        [
            "--validator.concurrency",
            "5",
            "--validator.allow_same_ip",
            "--wandb.off",
            "--subtensor.network",
            "sim:/tmp/x.db",
            "--netuid",
            "7",
        ],
        env,
    )
    assert (s.concurrency, s.pog_n, s.allow_same_ip, s.wandb_off, s.rows_per_gpu) == (5, 2048, True, True, 8)
    assert s.common.chain_target == "sim:/tmp/x.db" and s.db_path.name == "validator-7.db"


def test_bad_value_names_the_flag() -> None:
    with pytest.raises(SettingsError, match="--validator.ema_alpha"):
        parse_validator(["--validator.ema_alpha", "1.5"], {})


def test_wandb_absent_or_broken_never_breaks_the_validator(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import fails
    logger = WandbLogger(True, "p", "r", tmp_path)
    assert not logger.active
    logger.log_round(1, [], {}, {})
    logger.close()


@pytest.mark.slow
def test_validator_process_runs_one_round_sets_weights_and_exits(
    tmp_path: Path, sim_chain, start_miner, make_wallet
) -> None:
    path, state = sim_chain
    wallet = make_wallet("vali")
    state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, 5000.0, True)
    miner = start_miner("honest")
    uid = register_and_serve(path, state, miner)
    argv = [
        sys.executable,
        str(REPO / "neurons" / "validator.py"),
        "--subtensor.network",
        f"sim:{path}",
        "--netuid",
        "27",
        "--wallet.name",
        "vali",
        "--wallet.path",
        str(tmp_path / "wallets"),
        "--validator.rounds",
        "1",
        "--validator.round_blocks",
        "1",
        "--validator.allow_same_ip",
        "--validator.min_timed_s",
        "0",
        "--validator.pog_m",
        "64",
        "--validator.pog_n",
        "4096",
        "--validator.pog_p",
        "64",
        "--validator.device",
        "cpu",
        "--validator.miner_timeout",
        "60",
        "--validator.data_dir",
        str(tmp_path / "vdata"),
        "--wandb.off",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_", "WANDB"))}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Proof-of-GPU round 1" in proc.stdout
    chain = connect(f"sim:{path}", 27)
    try:
        assert chain.weights(chain.metagraph().uid_of(wallet.hotkey.ss58_address)) == pytest.approx(
            {uid: 1.0}
        )
    finally:
        chain.close()
