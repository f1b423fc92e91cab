"""The miner's commands end to end: a wallet on disk, an EVM key from the environment, the local
chain served over JSON-RPC on 127.0.0.1 (web3's HTTP provider, as against subtensor's EVM RPC)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from evm_world import DELAY, TAO, TTL, WINDOWS

from compute.__main__ import main
from compute.collateral.chain import CollateralConfig
from compute.collateral.deploy import deploy_stack
from compute.collateral.devchain import local_chain, rpc_app
from compute.collateral.errors import ContractReverted
from compute.collateral.hints import HINTS, explain, tao
from compute.transport import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]


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


def say(capsys, *argv: str) -> tuple[int, str, str]:
    """The command as people run it (no --json): exit code, stdout, stderr."""
    code = main(["collateral", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_people_read_tao_and_utc_never_wei_or_python_reprs(served, capsys) -> None:
    chain, flags, wallet = served
    people = [f for f in flags if f != "--json"]
    code, out, err = say(capsys, "deposit", *people, "--collateral.amount", "2.5")
    assert code == 0, err
    owner = out.split("(owner ")[1].split(")")[0]
    tx = re.fullmatch(r"tx {20}(0x[0-9a-f]{64}) \(gas [0-9,]+\)", out.splitlines()[1])
    assert tx is not None, out
    assert out.splitlines() == [
        f"hotkey                {wallet.hotkey.ss58_address}",
        out.splitlines()[1],
        f"deposit               2.5 TAO (owner {owner})",
        "slashes so far        0",
    ]
    code, out, err = say(capsys, "reclaim", *people, "--collateral.amount", "0.000000001")
    assert code == 0, err
    reclaim_at = out.split("payable from ")[1].splitlines()[0]
    assert re.fullmatch(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC", reclaim_at), out
    code, out, err = say(capsys, "status", *people, "--collateral.gpus", "2")
    assert code == 0, err
    assert out.splitlines() == [
        f"hotkey                {wallet.hotkey.ss58_address}",
        f"deposit               2.5 TAO (owner {owner})",
        f"pending reclaim       0.000000001 TAO, payable from {reclaim_at}",
        "slashes so far        0",
        "required              2 TAO for 2 GPUs",
        "next slash            2 TAO",
    ]
    code, body = run(capsys, "status", *flags)  # --json: exact wei integers, decimal TAO beside them
    assert body["deposit"]["amount"] == 25 * TAO // 10 and body["deposit"]["amount_tao"] == "2.5"
    assert body["required_tao"] == "1" and body["deposit"]["pending_reclaim_tao"] == "0.000000001"


@pytest.mark.slow
def test_a_revert_names_the_error_in_tao_and_says_what_to_do(served, capsys, monkeypatch) -> None:
    chain, flags, _ = served
    people = [f for f in flags if f != "--json"]
    code, _, err = say(capsys, "deposit", *people, "--collateral.amount", "0.01")
    assert code == 1
    assert err.splitlines() == [
        "error: contract reverted: BelowMinimum (minimum 0.1 TAO)",
        f"hint: {HINTS['BelowMinimum']}",
    ]
    code, _, err = say(capsys, "reclaim", *people, "--collateral.cancel")
    assert code == 1 and err.splitlines()[0] in (
        "error: contract reverted: NotOwner",  # no deposit yet: nobody owns it
        "error: contract reverted: NoReclaim",
    )
    stranger = chain.new_account()  # an EVM key nobody associated with a hotkey
    monkeypatch.setenv("COLLATERAL_EVM_KEY", stranger.key.hex())
    code, _, err = say(capsys, "deposit", *people, "--collateral.amount", "1")
    assert code == 1
    assert err.splitlines() == [
        "error: contract reverted: NotAssociated",
        "hint: this EVM key is not associated with a hotkey of the subnet: run "
        "`python -m compute collateral associate` with the same wallet and EVM key, then retry",
    ]


def test_every_error_the_contract_can_revert_with_has_a_hint() -> None:
    from compute.collateral.artifact import compiled

    declared = set(
        re.findall(r"^\s*error (\w+)\(", (ROOT / "contracts" / "Collateral.sol").read_text(), re.M)
    )
    in_abi = {item["name"] for item in compiled("Collateral").abi if item["type"] == "error"}
    assert declared == in_abi and len(declared) >= 26
    assert declared <= set(HINTS), sorted(declared - set(HINTS))
    assert all(hint and "\n" not in hint for hint in HINTS.values())


@pytest.mark.parametrize(
    "error, what",
    [
        (ContractReverted("NoQuorum", (3 * TAO, 10 * TAO)), "NoQuorum (attested stake 3 TAO, of 10 TAO)"),
        (
            ContractReverted("ReclaimTooEarly", (86_400,)),
            "ReclaimTooEarly (payable from 1970-01-02 00:00:00 UTC)",
        ),
        (
            ContractReverted("SlashPending", (2, 0)),
            "SlashPending (2 open proposal(s), blocking until 1970-01-01 00:00:00 UTC)",
        ),
        (ContractReverted("BadConfig", ("kappa",)), "BadConfig (kappa)"),
        (ContractReverted("reverted", detail="execution reverted"), "reverted - execution reverted"),
        (ContractReverted("SomethingNew"), "SomethingNew"),
    ],
)
def test_revert_arguments_read_in_tao_and_utc(error: ContractReverted, what: str) -> None:
    assert explain(error)[0] == f"contract reverted: {what}"
    assert explain(error)[1] == HINTS.get(error.error, HINTS["reverted"])


@pytest.mark.parametrize(
    "wei, text",
    [(0, "0 TAO"), (1, "0.000000000000000001 TAO"), (10**9, "0.000000001 TAO"), (25 * TAO // 10, "2.5 TAO"),
     (21_000_000 * TAO, "21000000 TAO")],
)  # fmt: skip
def test_tao_is_exact(wei: int, text: str) -> None:
    assert tao(wei) == text


@pytest.mark.slow
def test_register_claim_with_nothing_owed_says_why_and_what_to_do(served, capsys, tmp_path: Path) -> None:
    from compute.operator.cli import main as register_main

    _, flags, _ = served
    chain = tmp_path / "chain.db"
    assert main(["chain", "create", str(chain)]) == 0
    out, err = io.StringIO(), io.StringIO()
    code = register_main(
        [
            "--subtensor.network",
            f"sim:{chain}",
            "--register.data_dir",
            str(tmp_path / "register"),
            "claim",
            *flags,
        ],
        stdout=out,
        stderr=err,
    )
    assert code == 1, err.getvalue()
    message = json.loads(out.getvalue())["error"]["message"]
    assert message.startswith("the contract owes nothing to 0x")
    assert message.endswith(f"; hint: {HINTS['NothingOwed']}")
