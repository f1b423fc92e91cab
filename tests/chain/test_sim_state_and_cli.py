"""The simulated chain file, the `python -m compute chain` CLI and the `python -m compute` dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compute.__main__ import main as compute_main
from compute.__main__ import resolve
from compute.chain.cli import main as chain_main
from compute.chain.sim import SimChainError, SimChainState, SimDispatchError

REPO = Path(__file__).resolve().parents[2]
HOT = "5GFDYJa6RPA48oJyW9WGoMomZbaRg19WXmprdHRBq1rorp6U"
COLD = "5GQqBAjBwiG1Mgxp9hpRENxmT1ACWNMpHdGisvTVJmvWQEf4"
OTHER = "5H9EV918hgX6gYoH9rU7VfcAWSvaCRtVohyRR87XGdQLWKtF"


def test_register_is_idempotent_and_updates_stake(tmp_path):
    state = SimChainState.create(tmp_path / "c.db")
    assert state.register(HOT, COLD, 5.0) == 0
    assert state.register(OTHER, COLD, 1.0) == 1
    assert state.register(HOT, COLD, 7.5, validator_permit=True) == 0
    first = state.neurons(27)[0]
    assert (first.uid, first.stake_rao, first.validator_permit) == (0, 7_500_000_000, True)
    with pytest.raises(SimChainError, match="already owned"):
        state.register(HOT, OTHER, 1.0)


def test_create_refuses_to_replace_an_existing_chain(tmp_path):
    path = tmp_path / "c.db"
    SimChainState.create(path).register(HOT, COLD, 1.0)
    with pytest.raises(SimChainError, match="already exists"):
        SimChainState.create(path)
    assert SimChainState.create(path, overwrite=True).neurons(27) == []


def test_state_rejects_bad_configuration(tmp_path):
    with pytest.raises(SimChainError, match="block_time"):
        SimChainState.create(tmp_path / "a.db", block_time=0)
    with pytest.raises(SimChainError, match="tempo"):
        SimChainState.create(tmp_path / "b.db", tempo=0)
    state = SimChainState.create(tmp_path / "c.db")
    with pytest.raises(SimChainError, match="unknown hyperparameter"):
        state.set_hyperparameter(27, "owner; DROP TABLE neurons", 1)
    with pytest.raises(SimDispatchError, match="subnet 5 does not exist"):
        state.register(HOT, COLD, 1.0, netuid=5)


def test_file_that_is_not_a_chain_is_refused(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(SimChainError, match="is not a simulated chain"):
        SimChainState.open(path)


def test_cli_create_register_show(tmp_path, capsys):
    path = str(tmp_path / "c.db")
    assert (
        chain_main(["create", path, "--netuid", "27", "--block-time", "2", "--weights-rate-limit", "5"]) == 0
    )
    assert (
        chain_main(
            ["register", path, "--hotkey", HOT, "--coldkey", COLD, "--stake", "250", "--validator-permit"]
        )
        == 0
    )
    capsys.readouterr()
    assert chain_main(["show", path, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["netuid"], shown["block_time"], shown["weights_rate_limit"]) == (27, 2.0, 5)
    assert shown["neurons"] == [
        {
            "uid": 0,
            "hotkey": HOT,
            "coldkey": COLD,
            "stake": 250.0,
            "validator_permit": True,
            "axon": None,
            "last_update": 0,
            "weights_set": 0,
        }
    ]
    assert chain_main(["show", path]) == 0
    assert HOT in capsys.readouterr().out


def test_cli_register_from_wallet(tmp_path, make_wallet, capsys):
    wallet = make_wallet("op")
    path = str(tmp_path / "c.db")
    chain_main(["create", path])
    assert (
        chain_main(
            [
                "register",
                path,
                "--wallet.name",
                "op",
                "--wallet.hotkey",
                "default",
                "--wallet.path",
                str(Path(wallet.path)),
            ]
        )
        == 0
    )
    assert SimChainState.open(path).uid_of(27, wallet.hotkey.ss58_address) == 0


def test_cli_reports_bad_input_without_a_traceback(tmp_path, capsys):
    path = str(tmp_path / "c.db")
    chain_main(["create", path])
    assert chain_main(["register", path, "--hotkey", "nope", "--coldkey", COLD]) == 1
    assert "not an SS58 address" in capsys.readouterr().err
    assert chain_main(["register", path, "--wallet.name", "ghost", "--wallet.path", str(tmp_path)]) == 1
    assert "cannot load wallet" in capsys.readouterr().err
    assert chain_main(["show", str(tmp_path / "missing.db")]) == 1
    assert "no simulated chain" in capsys.readouterr().err
    assert chain_main(["create", path]) == 1


def test_cli_weights_lists_normalised_rows(tmp_path, capsys):
    path = tmp_path / "c.db"
    state = SimChainState.create(path)
    state.register(HOT, COLD, 10.0, True)
    state.register(OTHER, COLD, 1.0)
    state.set_weights(27, HOT, [0, 1], [65535, 21845], version_key=0)
    capsys.readouterr()
    assert chain_main(["weights", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows["0"] == pytest.approx({"0": 0.75, "1": 0.25}, abs=1e-4)


def test_dispatcher_names_missing_and_unknown_commands(capsys, monkeypatch):
    import compute.__main__ as dispatcher

    assert compute_main(["no-such-command"]) == 2
    assert "unknown command" in capsys.readouterr().err
    monkeypatch.setitem(dispatcher.COMMANDS, "probe", ("compute.no_such_module:main", "never lands"))
    with pytest.raises(LookupError, match="module compute.no_such_module does not exist yet"):
        resolve("probe")
    assert compute_main(["probe"]) == 2
    assert compute_main([]) == 2
    assert "chain" in capsys.readouterr().out


def test_python_dash_m_compute_chain_runs(tmp_path):
    path = str(tmp_path / "c.db")
    done = subprocess.run(
        [sys.executable, "-m", "compute", "chain", "create", path],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert Path(path).is_file()
