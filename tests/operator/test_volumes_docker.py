"""Persistent volumes end to end on real Docker, through register.py, the signed miner API and SSH.

A renter allocates with ``--volume``, writes a file over SSH; the file survives the health watch
restarting a killed container, a write past the volume's size fails with ENOSPC, another renter
can neither see, delete nor attach it (the same name is its own, empty volume), and after the
lease ends a new lease with another template (image) finds the file again. Deleting is refused
while attached and then removes the data for good.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from flow import alt_template_image, renter_key, ssh

from compute.allocation.docker.templates import load_templates
from compute.allocation.volumes.keeper import VolumeLimits
from compute.operator import EXIT_OK, EXIT_REFUSED

pytestmark = pytest.mark.docker
ALT = "compute-volume-test:alt"


@pytest.fixture(scope="module")
def alt_image() -> Iterator[str]:
    yield from alt_template_image(ALT)


@pytest.fixture
def volume_subnet(tmp_path: Path, start_docker_subnet, alt_image: str):
    catalog_file = tmp_path / "templates.yaml"
    catalog_file.write_text(
        "default: cpu\ntemplates:\n"
        "  - {name: cpu, image: 'compute-base:cpu', kind: cpu}\n"
        f"  - {{name: alt, image: '{alt_image}', kind: cpu}}\n"
    )
    catalog = load_templates(catalog_file, "unused:tag")
    return start_docker_subnet(templates=catalog, volumes=VolumeLimits(max_per_renter_gb=1.0))


def docker_volumes(owner: str) -> list:
    import docker

    return docker.from_env().volumes.list(filters={"label": f"compute.owner={owner}"})


def lease_container(lease_id: str):
    import docker

    (container,) = docker.from_env().containers.list(all=True, filters={"name": lease_id})
    return container


def test_volume_outlives_restart_and_image_change_and_stays_its_owners(volume_subnet, tmp_path: Path) -> None:
    net = volume_subnet
    pub_a, pub_b = renter_key(tmp_path / "a"), renter_key(tmp_path / "b")
    code, body = net.cli("operator_a", "allocate", "--volume", "alpha:0.2", "--ssh-key", str(pub_a))
    assert code == EXIT_OK, body
    lease, command = body["lease"]["lease_id"], body["ssh_command"]
    done = ssh(command, "echo keep > /workspace/f && df -k /workspace | tail -1")
    assert done.returncode == 0, done.stderr
    size_kb = int(done.stdout.split()[1])
    assert 0.15 * 1024**2 < size_kb <= 0.2 * 1024**2, done.stdout  # the volume is its size

    lease_container(lease).kill()  # the health watch restarts it: the data stays
    health = asyncio.run(net.monitor.check_once())
    assert (health[lease].status, health[lease].restarts) == ("up", 1)
    assert ssh(command, "cat /workspace/f").stdout.strip() == "keep"

    full = ssh(command, "dd if=/dev/zero of=/workspace/big bs=1M count=400 2>&1; rm -f /workspace/big")
    assert "No space left on device" in full.stdout  # a hard limit: ENOSPC inside the lease

    code, body = net.cli("operator_a", "volumes")
    assert code == EXIT_OK, body
    (listed,) = body["miners"][0]["volumes"]
    assert (listed["name"], listed["size_gb"], listed["quota"]) == ("alpha", 0.2, "hard")
    assert listed["attached_lease"] == lease and listed["expires_at"] is None
    code, body = net.cli("operator_a", "volume-delete", "alpha")
    assert code == EXIT_REFUSED and body["error"]["code"] == "volume_busy", body

    miner = ["--hotkey", net.miner_hotkey]
    code, body = net.cli("operator_b", "volume-delete", "alpha", *miner)
    assert code == EXIT_REFUSED and body["error"]["code"] == "volume_not_found", body
    code, body = net.cli("operator_b", "volumes", *miner)
    assert code == EXIT_OK and body["miners"][0]["volumes"] == [], body
    code, body = net.cli("operator_b", "allocate", "--volume", "alpha:0.2", "--ssh-key", str(pub_b), *miner)
    assert code == EXIT_OK, body
    other = ssh(body["ssh_command"], "ls /workspace")
    assert other.returncode == 0 and "f" not in other.stdout.split()  # its own, empty volume
    code, body = net.cli("operator_b", "allocate", "--volume", "alpha:0.9", "--ssh-key", str(pub_b), *miner)
    assert code == EXIT_REFUSED and "volume_busy" in body["error"]["message"] + body["error"]["code"], body

    code, body = net.cli("operator_a", "deallocate", lease)
    assert code == EXIT_OK, body
    code, body = net.cli("operator_a", "volumes")
    (listed,) = body["miners"][0]["volumes"]
    assert listed["attached_lease"] is None and listed["expires_at"] > listed["last_used_at"]
    code, body = net.cli(
        "operator_a", "allocate", "--volume", "alpha", "--template", "alt", "--ssh-key", str(pub_a)
    )
    assert code == EXIT_OK, body
    again = ssh(body["ssh_command"], "cat /etc/compute-template /workspace/f")
    assert again.stdout.split() == ["alt", "keep"], again.stderr

    code, body = net.cli("operator_a", "deallocate", body["lease"]["lease_id"])
    assert code == EXIT_OK, body
    code, body = net.cli("operator_a", "volume-delete", "alpha")
    assert code == EXIT_OK and body["deleted"] is True, body
    code, body = net.cli("operator_a", "volumes")
    assert body["miners"][0]["volumes"] == []
    assert docker_volumes(net.operators["operator_a"]) == []  # gone from the engine
    assert len(docker_volumes(net.operators["operator_b"])) == 1  # B's volume of the same name stays
    assert len(list((tmp_path / "miner" / "volumes" / "images").glob("*.img"))) == 1  # B's image only


def test_volume_caps_are_refused_with_a_clear_error(volume_subnet, tmp_path: Path) -> None:
    net = volume_subnet
    pub = renter_key(tmp_path / "a")
    code, body = net.cli("operator_a", "allocate", "--volume", "huge:2", "--ssh-key", str(pub))
    assert code == EXIT_REFUSED, body
    assert "1 GB of volumes per renter" in body["error"]["message"], body
    code, body = net.cli("operator_a", "allocate", "--volume", "Bad/Name", "--ssh-key", str(pub))
    assert code == 2 and "NAME[:SIZE_GB]" in body["error"]["message"], body
