"""The renter's whole journey, shared by the embedded and Docker variants of the e2e test."""

from __future__ import annotations

import asyncio
import io
import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncssh

from compute.operator import EXIT_OK, EXIT_REFUSED


def ssh(command_line: str, remote: str, binary: bool = True) -> subprocess.CompletedProcess:
    """Run the printed ssh command plus ``remote``: the real ``ssh`` binary, or asyncssh reading
    the same key and known_hosts files when ``binary`` is False or no ssh is installed."""
    parts = shlex.split(command_line)
    if binary and shutil.which("ssh"):
        argv = [
            parts[0],
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            *parts[1:],
            remote,
        ]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return _asyncssh_run(parts, remote)


def _asyncssh_run(parts: list[str], remote: str) -> subprocess.CompletedProcess:
    pairs = list(zip(parts[1:-1:2], parts[2:-1:2], strict=True))
    key = next(value for flag, value in pairs if flag == "-i")
    port = int(next(value for flag, value in pairs if flag == "-p"))
    options = dict(value.split("=", 1) for flag, value in pairs if flag == "-o")
    assert options["StrictHostKeyChecking"] == "yes"
    user, host = parts[-1].split("@")

    async def go() -> subprocess.CompletedProcess:
        try:
            async with asyncssh.connect(
                host,
                port,
                username=user,
                client_keys=[key],
                known_hosts=options["UserKnownHostsFile"],
                agent_path=None,
                config=None,
                connect_timeout=10,
            ) as conn:
                done = await conn.run(remote, timeout=30)
                return subprocess.CompletedProcess(parts, done.exit_status or 0, done.stdout, done.stderr)
        except (asyncssh.Error, OSError) as exc:
            return subprocess.CompletedProcess(parts, 255, "", str(exc))

    return asyncio.run(go())


def renter_key(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    key = asyncssh.generate_private_key("ssh-ed25519")
    (directory / "id_renter").write_bytes(key.export_private_key())
    (directory / "id_renter").chmod(0o600)
    (directory / "id_renter.pub").write_bytes(key.export_public_key())
    return directory / "id_renter.pub"


def machine_state(subnet, operator: str, *filters: str) -> str:
    code, body = subnet.cli(operator, "resources", *filters)
    assert code == EXIT_OK, body
    return next(m["state"] for m in body["machines"] if m["hotkey"] == subnet.miner_hotkey)


def full_rental_flow(subnet, tmp_path: Path, gpu: bool = True) -> None:
    """allocate -> ssh -> list -> extend -> exchange key -> second operator refused -> deallocate.

    ``gpu``: the miner rents out one (pretend) H100 and the renter asks for it; without, a CPU lease.
    """
    wanted = ["--gpu-model", "H100", "--gpu-count", "1"] if gpu else ["--cpu", "1", "--ram", "0.5"]
    filters = ["--gpu-count", "1"] if gpu else []
    busy = "rented" if gpu else "partly rented"
    assert machine_state(subnet, "operator_a", *filters) == "free"
    pub = renter_key(tmp_path / "renter")

    code, body = subnet.cli("operator_a", "allocate", *wanted, "--hours", "1", "--ssh-key", str(pub))
    assert code == EXIT_OK, body
    lease = body["lease"]
    lease_id = lease["lease_id"]
    assert body["machine"]["uid"] == subnet.miner_uid and body["machine"]["verified"] is False
    assert lease["ssh"]["private_key_file"] == str(pub.with_suffix(""))
    done = ssh(body["ssh_command"], "echo hello-from-lease")
    assert done.returncode == 0 and "hello-from-lease" in done.stdout, done.stderr

    code, body = subnet.cli("operator_a", "list")
    assert code == EXIT_OK and [e["lease_id"] for e in body["leases"]] == [lease_id]
    assert 3500 < body["leases"][0]["time_left_s"] <= 3600
    assert machine_state(subnet, "operator_a", *filters) == busy

    code, body = subnet.cli("operator_a", "extend", lease_id, "--hours", "2")
    assert code == EXIT_OK and body["lease"]["expires_at"] == lease["expires_at"] + 7200

    code, body = subnet.cli("operator_a", "exchange-key", lease_id[:8])
    assert code == EXIT_OK, body
    new_key = Path(body["lease"]["ssh"]["private_key_file"])
    assert stat.S_IMODE(new_key.stat().st_mode) == 0o600 and body["lease"]["ssh"]["key_generated"]
    old = ssh(lease_command_with_key(body["ssh_command"], pub.with_suffix("")), "echo old")
    assert old.returncode != 0 and "old" not in old.stdout
    new = ssh(body["ssh_command"], "echo new-key-works")
    assert new.returncode == 0 and "new-key-works" in new.stdout, new.stderr

    second_operator_is_refused(subnet, lease_id)

    code, body = subnet.cli("operator_a", "deallocate", lease_id)
    assert code == EXIT_OK and body["state"] == "released"
    assert not new_key.exists(), "a generated key that opens nothing any more is deleted"
    assert pub.exists(), "the renter's own key is never touched"
    code, body = subnet.cli("operator_a", "list")
    assert code == EXIT_OK and body["leases"] == []
    assert machine_state(subnet, "operator_a", *filters) == "free"
    code, body = subnet.cli("operator_a", "status", lease_id)
    assert code == EXIT_OK and body["lease"]["state"] == "released" and body["ssh_command"] is None
    code, body = subnet.cli("operator_a", "extend", lease_id, "--hours", "1")
    assert code == EXIT_REFUSED and body["error"]["code"] in ("lease_expired", "lease_not_found"), body


def lease_command_with_key(command_line: str, key: Path) -> str:
    parts = shlex.split(command_line)
    parts[parts.index("-i") + 1] = str(key)
    return shlex.join(parts)


def second_operator_is_refused(subnet, lease_id: str) -> None:
    """operator_b names the miner explicitly; the miner, not the local book, refuses it."""
    target = ["--miner-hotkey", subnet.miner_hotkey]
    for args in (
        ["deallocate", lease_id],
        ["extend", lease_id, "--hours", "1"],
        ["exchange-key", lease_id],
        ["restart", lease_id],
        ["status", lease_id],
    ):
        code, body = subnet.cli("operator_b", *args, *target)
        assert code == EXIT_REFUSED and body["error"]["code"] == "not_owner", (args, body)
    keys = subnet.root / "register-operator_b" / "keys"
    assert not keys.exists() or list(keys.iterdir()) == [], "a refused exchange leaves no key behind"
    code, body = subnet.cli("operator_b", "list", "--all")
    assert code == EXIT_OK and body["leases"] == []


def alt_template_image(tag: str) -> Iterator[str]:
    """A second image (``compute-base:cpu`` plus a marker file) for template tests; removed after.
    Skips without an engine or base image, and fails instead under ``COMPUTE_REQUIRE_DOCKER=1``."""
    import pytest

    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.images.get("compute-base:cpu")
    except Exception as exc:  # no engine or no base image: cannot run here
        if os.environ.get("COMPUTE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"COMPUTE_REQUIRE_DOCKER=1 but Docker or compute-base:cpu is unavailable ({exc})")
        pytest.skip(f"Docker or compute-base:cpu unavailable ({exc}); see scripts/build_base_image.sh")
    dockerfile = b"FROM compute-base:cpu\nRUN echo alt > /etc/compute-template\n"
    client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True)
    yield tag
    client.images.remove(tag, force=True)
