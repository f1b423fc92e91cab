"""The miner's commands end to end: a wallet on disk, an EVM key from the environment, the local
chain served over JSON-RPC on 127.0.0.1 (web3's HTTP provider, as against subtensor's EVM RPC)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DELAY, TAO, TTL, WINDOWS

from compute.__main__ import main
from compute.collateral.chain import CollateralConfig
from compute.collateral.deploy import deploy_stack
from compute.collateral.devchain import local_chain, rpc_app
from compute.transport import serve_in_thread


@pytest.fixture
def served(make_wallet, monkeypatch, tmp_path: Path):
    chain = local_chain()
    config = CollateralConfig(
        rate_per_gpu_day=TAO, min_deposit=TAO // 10, reclaim_delay_s=DELAY, proposal_ttl_s=TTL
    )
    stack = deploy_stack(chain.w3, chain.accounts[0], config, 27, doubles=True, windows=WINDOWS)
    wallet = make_wallet("cli-miner")
    evm = chain.new_account()
    assert stack.mirror is not None
    stack.mirror.set_neuron(0, wallet.hotkey.ss58_address, 0, False)
    stack.mirror.associate(evm.address, 0)
    server = serve_in_thread(rpc_app(chain))
    monkeypatch.setenv("COLLATERAL_EVM_KEY", evm.key.hex())
    monkeypatch.chdir(tmp_path)  # no stray .env
    flags = [
        "--collateral.rpc",
        server.url,
        "--collateral.address",
        stack.collateral,
        "--wallet.name",
        "cli-miner",
        "--wallet.hotkey",
        "default",
        "--wallet.path",
        str(tmp_path / "wallets"),
        "--json",
    ]
    yield chain, flags, wallet
    server.stop()


def run(capsys, *argv: str) -> tuple[int, dict | str]:
    code = main(["collateral", *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


def test_deposit_topup_status_and_reclaim_through_the_rpc(served, capsys) -> None:
    chain, flags, wallet = served
    code, out = run(capsys, "topup", *flags, "--collateral.amount", "1")
    assert code == 1 and "no deposit" in out
    code, out = run(capsys, "deposit", *flags, "--collateral.amount", "2.5")
    assert code == 0 and out["deposit"]["amount"] == 25 * TAO // 10 and out["gas"] > 21_000
    assert out["hotkey"] == wallet.hotkey.ss58_address  # one deposit per hotkey, no machine to name
    code, out = run(capsys, "topup", *flags, "--collateral.amount", "0.5")
    assert code == 0 and out["deposit"]["amount"] == 3 * TAO
    code, out = run(capsys, "status", *flags, "--collateral.gpus", "2")
    assert code == 0, out
    assert out["required_wei"] == 2 * TAO and out["next_slash_wei"] == 2 * TAO
    code, out = run(capsys, "reclaim", *flags, "--collateral.amount", "1")
    assert code == 0 and out["deposit"]["pending_reclaim"] == TAO
    code, out = run(capsys, "reclaim", *flags, "--collateral.finalize")
    assert code == 1 and "ReclaimTooEarly" in out
    chain.advance(DELAY + 1)
    code, out = run(capsys, "reclaim", *flags, "--collateral.finalize")
    assert code == 0 and out["deposit"]["amount"] == 2 * TAO and out["deposit"]["pending_reclaim"] == 0


@pytest.mark.parametrize(
    "argv, error",
    [
        (["deposit", "--collateral.amount", "0.0000000000001"], "whole number of rao"),
        (["deposit", "--collateral.amount", "lots"], "not a number"),
        (["deposit", "--collateral.amount", "-1"], "whole number of rao"),
        (["reclaim"], "one of --collateral.amount"),
        (["reclaim", "--collateral.amount", "1", "--collateral.finalize"], "one of --collateral.amount"),
    ],
)
def test_bad_input_gets_a_clear_error_and_moves_nothing(served, capsys, argv, error) -> None:
    _, flags, _ = served
    code, out = run(capsys, *argv[:1], *flags, *argv[1:])
    assert code == 1 and error in out
    code, out = run(capsys, "status", *flags)
    assert out["deposit"]["amount"] == 0


def test_no_evm_key_says_how_to_get_one(served, capsys, monkeypatch) -> None:
    _, flags, _ = served
    monkeypatch.delenv("COLLATERAL_EVM_KEY")
    code, out = run(capsys, "deposit", *flags, "--collateral.amount", "1")
    assert code == 1 and "COLLATERAL_EVM_KEY" in out and "evmkeys" in out
    monkeypatch.setenv("COLLATERAL_EVM_KEY", "0x1234")
    code, out = run(capsys, "deposit", *flags, "--collateral.amount", "1")
    assert code == 1 and "64 characters" in out
