"""``register.py ssh|exec|cp`` against a real lease, shared by the embedded and Docker tests."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from compute.operator import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, main

REPO = Path(__file__).resolve().parents[2]


def cli(subnet, operator: str, *args: str) -> tuple[int, dict]:
    """``register.py --json ARGS`` in-process (``--json`` first: after ``--`` it is the command's)."""
    out, err = io.StringIO(), io.StringIO()
    code = main([*subnet.flags(operator), "--json", *args], stdout=out, stderr=err)
    return code, json.loads(out.getvalue())


def cli_text(subnet, operator: str, *args: str) -> tuple[int, str, str]:
    """``register.py ARGS`` in-process without ``--json``: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main([*subnet.flags(operator), *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def register_subprocess(subnet, operator: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(REPO / "neurons" / "register.py"), *subnet.flags(operator), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)


def allocate(subnet, operator: str = "operator_a") -> str:
    code, body = cli(subnet, operator, "allocate", "--uid", str(subnet.miner_uid), "--duration", "30m")
    assert code == EXIT_OK, body
    return body["lease"]["lease_id"]


def exec_cp_ssh_journey(subnet, tmp_path: Path) -> None:
    """exec (JSON, streamed, exit status, timeout), cp both ways with -r, ssh through OpenSSH."""
    lease = allocate(subnet)
    short = lease[:8]

    code, body = cli(subnet, "operator_a", "exec", short, "--", "echo out; echo err >&2; exit 3")
    assert code == 3, body
    assert (body["exit_status"], body["stdout"], body["stderr"]) == (3, "out\n", "err\n")
    code, out, err = cli_text(subnet, "operator_a", "exec", short, "--", "printf", "%s|", "a b", "c")
    assert (code, out, err) == (0, "a b|c|", "")  # several words are quoted one by one

    local = tmp_path / "upload"
    (local / "sub").mkdir(parents=True)
    (local / "a.txt").write_text("alpha\n")
    (local / "sub" / "b.bin").write_bytes(bytes(range(256)) * 64)
    code, body = cli(subnet, "operator_a", "cp", str(local / "a.txt"), f"{short}:a.txt")
    assert code == EXIT_OK and body["direction"] == "upload", body
    code, body = cli(subnet, "operator_a", "cp", "-r", str(local), f"{short}:tree")
    assert code == EXIT_OK, body
    code, body = cli(
        subnet, "operator_a", "exec", short, "--", "cat a.txt; sha256sum tree/sub/b.bin | cut -c1-16"
    )
    assert code == 0 and body["stdout"].splitlines()[0] == "alpha", body
    import hashlib

    digest = hashlib.sha256((local / "sub" / "b.bin").read_bytes()).hexdigest()[:16]
    assert body["stdout"].splitlines()[1] == digest

    back = tmp_path / "download"
    code, body = cli(subnet, "operator_a", "cp", "-r", f"{short}:tree", str(back))
    assert code == EXIT_OK and body["direction"] == "download", body
    assert (back / "sub" / "b.bin").read_bytes() == (local / "sub" / "b.bin").read_bytes()
    code, body = cli(subnet, "operator_a", "cp", f"{short}:no-such-file", str(tmp_path / "x"))
    assert code == EXIT_REFUSED and body["error"]["code"] == "transfer_failed", body
    code, body = cli(subnet, "operator_a", "cp", str(local), f"{short}:d")
    assert code == EXIT_REFUSED and "-r" in body["error"]["message"]
    code, body = cli(subnet, "operator_a", "cp", "a", "b")
    assert code == EXIT_USAGE and "LEASE:PATH" in body["error"]["message"]

    code, body = cli(subnet, "operator_a", "exec", short, "--timeout", "1", "--", "sleep 30")
    assert code == EXIT_REFUSED and body["error"]["code"] == "command_timeout", body

    done = register_subprocess(subnet, "operator_a", "ssh", short, "--", "cat", "a.txt", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "alpha\n"), done.stderr
    done = register_subprocess(subnet, "operator_a", "ssh", short, "--", "exit 7", cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    code, body = cli(subnet, "operator_a", "ssh", short)
    assert (
        code == EXIT_OK
        and "StrictHostKeyChecking=yes" in body["argv"]
        and "ServerAliveInterval=30" in body["argv"]
        and "UserKnownHostsFile=" in body["command"]
    )

    # streamed output of a real subprocess, line by line as the command prints it
    done = register_subprocess(
        subnet, "operator_a", "exec", short, "--", "for i in 1 2 3; do echo $i; done", cwd=tmp_path
    )
    assert (done.returncode, done.stdout) == (0, "1\n2\n3\n"), done.stderr
    assert cli(subnet, "operator_a", "deallocate", lease)[0] == EXIT_OK
    code, body = cli(subnet, "operator_a", "exec", short, "--", "true")
    assert code == EXIT_REFUSED and body["error"]["code"] == "lease_not_ready"


def host_key_mismatch_journey(subnet, tmp_path: Path) -> None:
    """A lease answering with another host key than the miner signed gets nothing: no command runs."""
    lease = allocate(subnet)
    code, body = cli(subnet, "operator_a", "status", lease)
    known = Path(body["lease"]["ssh"]["known_hosts_file"])
    pinned = known.read_text()
    import asyncssh

    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().split()[:2]
    known.write_text(pinned.split()[0] + " " + " ".join(other) + "\n")
    for args in (("exec", lease, "--", "touch tampered"), ("cp", __file__, f"{lease}:tampered")):
        code, body = cli(subnet, "operator_a", *args)
        assert code == EXIT_REFUSED and body["error"]["code"] == "host_key_mismatch", body
    done = register_subprocess(subnet, "operator_a", "ssh", lease, "--", "touch tampered", cwd=tmp_path)
    assert done.returncode == 255 and "host key" in done.stderr.lower(), done.stderr
    known.write_text(pinned)
    code, body = cli(subnet, "operator_a", "exec", lease, "--", "ls tampered 2>/dev/null | wc -l")
    assert code == 0 and body["stdout"].strip() == "0", body
    assert json.dumps(body)  # JSON-clean
    assert cli(subnet, "operator_a", "deallocate", lease)[0] == EXIT_OK
