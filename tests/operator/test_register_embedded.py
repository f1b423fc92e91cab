"""register.py against a real miner (embedded backend) on a simulated chain, over real SSH."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from flow import full_rental_flow, renter_key, ssh

from compute.operator import EXIT_OK, EXIT_REFUSED, EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]


def test_rental_lifecycle_allocate_ssh_extend_exchange_deallocate(subnet, tmp_path):
    full_rental_flow(subnet, tmp_path)


def test_resources_lists_online_and_offline_miners_as_json(subnet):
    code, body = subnet.cli("operator_a", "resources")
    assert code == EXIT_OK and body["ok"] is True
    by_uid = {m["uid"]: m for m in body["machines"]}
    assert set(by_uid) == {subnet.miner_uid, subnet.offline_uid}
    online = by_uid[subnet.miner_uid]
    assert (online["state"], online["gpu_model"], online["gpu_count"], online["verified"]) == (
        "free",
        "NVIDIA H100 80GB HBM3",
        1,
        False,
    )
    assert (online["cpu"], online["backend"]) == (4, "embedded")
    assert by_uid[subnet.offline_uid]["state"] == "offline" and by_uid[subnet.offline_uid]["error"]
    code, body = subnet.cli("operator_a", "resources", "--available-only", "--gpu-model", "A100")
    assert code == EXIT_OK and body["machines"] == []


def test_allocation_with_a_generated_key_then_restart_keeps_ssh_working(subnet):
    code, body = subnet.cli("operator_a", "allocate", "--uid", str(subnet.miner_uid), "--duration", "30m")
    assert code == EXIT_OK, body
    key = Path(body["lease"]["ssh"]["private_key_file"])
    assert key.stat().st_mode & 0o777 == 0o600 and key.parent.stat().st_mode & 0o777 == 0o700
    lease_id = body["lease"]["lease_id"]
    code, body = subnet.cli("operator_a", "restart", lease_id)
    assert code == EXIT_OK and body["lease"]["state"] == "active"
    done = ssh(body["ssh_command"], "echo after-restart", binary=False)  # asyncssh reads our files too
    assert done.returncode == 0 and "after-restart" in done.stdout, done.stderr
    code, body = subnet.cli("operator_a", "list", "--refresh")
    assert code == EXIT_OK and body["problems"] == {} and len(body["leases"]) == 1
    assert subnet.cli("operator_a", "deallocate", lease_id)[0] == EXIT_OK


def test_no_matching_machine_is_refused_with_exit_1(subnet):
    code, body = subnet.cli("operator_a", "allocate", "--gpu-model", "B200", "--gpu-count", "1")
    assert code == EXIT_REFUSED and body["error"]["code"] == "no_matching_machine"
    keys = subnet.root / "register-operator_a" / "keys"
    assert not keys.exists() or list(keys.iterdir()) == [], "no key pair left behind by a failed allocation"


def test_allocating_from_an_offline_miner_says_so(subnet):
    code, body = subnet.cli("operator_a", "allocate", "--uid", str(subnet.offline_uid))
    assert code == EXIT_REFUSED and body["error"]["code"] == "miner_offline"


def test_usage_errors_exit_2(subnet, tmp_path):
    assert subnet.cli("operator_a", "extend", "not-a-lease", "--hours", "1")[0] == EXIT_USAGE
    code, body = subnet.cli("operator_a", "allocate", "--ssh-key", str(tmp_path / "missing.pub"))
    assert code == EXIT_USAGE and body["error"]["code"] == "bad_key_file"
    code, body = subnet.cli("operator_a", "allocate", "--duration", "10s")
    assert code == EXIT_USAGE
    code, body = subnet.cli("operator_a", "--register.timeout", "-1", "list")
    assert code == EXIT_USAGE and "--register.timeout" in body["error"]["message"]
    code, body = subnet.cli("nobody", "list")
    assert code == EXIT_USAGE and "cannot be loaded" in body["error"]["message"]


def test_unknown_lease_not_in_book_needs_a_miner(subnet):
    code, body = subnet.cli("operator_a", "status", "0" * 32)
    assert code == EXIT_REFUSED and "--miner-hotkey" in body["error"]["message"]
    code, body = subnet.cli("operator_a", "status", "0" * 32, "--uid", str(subnet.miner_uid))
    assert code == EXIT_REFUSED and body["error"]["code"] == "lease_not_found"


def test_subprocess_cli_prints_parsable_json(subnet, tmp_path):
    pub = renter_key(tmp_path / "k")
    argv = [
        sys.executable,
        str(REPO / "neurons" / "register.py"),
        *subnet.flags("operator_a"),
        "allocate",
        "--ssh-key",
        str(pub),
        "--hours",
        "1",
        "--json",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] and body["ssh_command"].startswith("ssh -i ")
    assert subnet.cli("operator_a", "deallocate", body["lease"]["lease_id"])[0] == EXIT_OK


def test_a_hotkey_the_miner_refuses_sees_why(subnet, make_wallet):
    make_wallet("stranger")  # a wallet, but not registered on the subnet: miners refuse it
    code, body = subnet.cli("stranger", "resources")
    assert code == EXIT_OK
    states = {m["uid"]: (m["state"], m["refused_us"]) for m in body["machines"]}
    assert states == {subnet.miner_uid: ("refused", True), subnet.offline_uid: ("offline", False)}
    code, body = subnet.cli("stranger", "allocate")
    assert code == EXIT_REFUSED and "1 miner(s) refused this hotkey" in body["error"]["message"]
    assert "not registered" in body["error"]["message"]
