"""What people see: rich tables, the ssh command, the interactive menu, PoG-verified machines."""

from __future__ import annotations

import io
import time

import pytest
from flow import renter_key
from operator_helpers import GPU_NAME

from compute.operator import EXIT_OK, main
from compute.store import PogResult, ValidatorStore


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich reads it: no wrapped cells to match against


def run_plain(subnet, operator: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*subnet.flags(operator), *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_tables_show_unverified_gpus_and_a_ready_ssh_command(subnet, tmp_path):
    code, out, _ = run_plain(subnet, "operator_a", "resources")
    assert code == EXIT_OK and "Rentable machines (2)" in out and "(unverified)" in out and "offline" in out
    pub = renter_key(tmp_path / "k")
    code, out, _ = run_plain(subnet, "operator_a", "allocate", "--ssh-key", str(pub))
    assert code == EXIT_OK and "Lease allocated" in out
    command = out.split("Connect with:\n", 1)[1].strip()
    assert command.startswith(f"ssh -i {pub.with_suffix('')} ") and "StrictHostKeyChecking=yes" in command
    code, out, _ = run_plain(subnet, "operator_a", "list")
    assert code == EXIT_OK and "My leases (1)" in out
    lease_id = out.split("│ ", 2)[1].split()[0] if "│ " in out else None
    assert lease_id and len(lease_id) == 32
    code, out, _ = run_plain(subnet, "operator_a", "deallocate", lease_id)
    assert code == EXIT_OK and f"Lease {lease_id} released." in out


def test_errors_go_to_stderr_in_one_readable_line(subnet):
    code, out, err = run_plain(subnet, "operator_a", "allocate", "--gpu-model", "B200")
    assert code == 1 and out == ""
    assert err.startswith("error (no_matching_machine): no available machine matches gpu_model=B200")


def test_interactive_menu_drives_the_same_commands(subnet, monkeypatch):
    answers = iter(
        [
            "1",
            "",
            "",
            "n",  # resources: any model, any count, not only available
            "2",
            "",
            "",
            "",
            "",
            "",
            "",  # allocate: defaults, generated key, no volume
            "y",  # rent the machine shown
            "99",  # unknown choice
            "3",
            "n",  # list
            "4",
            "zz",  # status of a bad id: argparse says so, menu goes on
            "9",  # volumes: none on this (embedded) miner
            "10",
            "Bad Name!",  # volume-delete of an invalid name: refused in one line, menu goes on
            "q",
        ]
    )
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    code, out, err = run_plain(subnet, "operator_a", "interactive")
    assert code == EXIT_OK
    assert "Rentable machines (2)" in out and "Lease allocated" in out and "My leases (1)" in out
    assert "Unknown choice '99'" in out and "not a lease id" in out + err
    assert "Your volumes (0)" in out and "'Bad Name!': expected NAME" in out + err
    assert next(answers, None) is None


def _verified(store_dir, hotkey: str, uid: int, model: str, age_s: float = 60.0) -> None:
    store = ValidatorStore(store_dir / "validator.db")
    round_id = store.begin_round(1).round_id
    store.record_result(
        PogResult(
            round_id=round_id,
            uid=uid,
            hotkey=hotkey,
            ok=True,
            sample=1.0,
            models=(model,),
            gpu_count=1,
            created=time.time() - age_s,
        )
    )
    store.close()


def test_pog_verified_model_is_shown_and_wins_over_the_miners_claim(subnet, tmp_path):
    _verified(tmp_path / "validator", subnet.miner_hotkey, subnet.miner_uid, GPU_NAME)
    pog = ["--validator.data_dir", str(tmp_path / "validator")]
    code, body = subnet.cli("operator_a", *pog, "resources", "--available-only")
    assert code == EXIT_OK and [(m["uid"], m["verified"]) for m in body["machines"]] == [
        (subnet.miner_uid, True)
    ]
    code, body = subnet.cli("operator_a", *pog, "allocate", "--gpu-model", "H100", "--gpu-count", "1")
    assert code == EXIT_OK and body["machine"]["verified"] is True and body["lease"]["verified"] is True
    assert subnet.cli("operator_a", "deallocate", body["lease"]["lease_id"])[0] == EXIT_OK

    other = tmp_path / "liar"
    _verified(other, subnet.miner_hotkey, subnet.miner_uid, "NVIDIA A100 40GB")
    code, body = subnet.cli(
        "operator_a", "--register.pog_db", str(other / "validator.db"), "allocate", "--gpu-model", "H100"
    )
    assert code == 1 and body["error"]["code"] == "no_matching_machine"


def test_a_proof_older_than_the_renters_limit_marks_nothing(subnet, tmp_path, caplog):
    """A validator's proof from 25 h ago (the machine may have left since) neither marks the
    machine verified nor ranks it; the renter is told why, and may accept any age."""
    _verified(tmp_path / "validator", subnet.miner_hotkey, subnet.miner_uid, GPU_NAME, age_s=25 * 3600)
    pog = ["--validator.data_dir", str(tmp_path / "validator")]
    code, body = subnet.cli("operator_a", *pog, "resources", "--available-only")
    assert code == EXIT_OK and [(m["uid"], m["verified"]) for m in body["machines"]] == [
        (subnet.miner_uid, False)
    ]
    assert "1 machine proof(s) older than 24 h not used, the newest of them 25.0 h old" in caplog.text
    code, body = subnet.cli(
        "operator_a", *pog, "--register.max_proof_age", "26", "resources", "--available-only"
    )
    assert code == EXIT_OK and [m["verified"] for m in body["machines"]] == [True]
    code, body = subnet.cli(
        "operator_a", *pog, "--register.max_proof_age", "0", "resources", "--available-only"
    )
    assert code == EXIT_OK and [m["verified"] for m in body["machines"]] == [True]
    code, body = subnet.cli("operator_a", *pog, "--register.max_proof_age", "-1", "resources")
    assert code == 2 and "max_proof_age" in body["error"]["message"]
