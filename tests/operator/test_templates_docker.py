"""Templates end to end on real Docker: the miner lists them, register.py allocates with one, the
container runs that image (checked over SSH), a restart keeps it, an unknown one is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flow import alt_template_image, renter_key, ssh

from compute.allocation.docker.templates import load_templates
from compute.operator import EXIT_OK, EXIT_REFUSED

pytestmark = pytest.mark.docker
ALT = "compute-template-test:alt"


@pytest.fixture(scope="module")
def alt_image() -> Iterator[str]:
    yield from alt_template_image(ALT)


@pytest.fixture
def template_subnet(tmp_path: Path, start_docker_subnet, alt_image: str):
    catalog_file = tmp_path / "templates.yaml"
    catalog_file.write_text(
        "default: cpu\ntemplates:\n"
        "  - {name: cpu, image: 'compute-base:cpu', version: debian12, kind: cpu}\n"
        f"  - {{name: alt, image: '{alt_image}', version: '1.0', kind: cpu, description: marker file}}\n"
        "  - {name: ghost, image: 'compute-template-test:missing', kind: cuda}\n"
    )
    from compute.miner.service import image_present

    catalog = load_templates(catalog_file, "unused:tag").present(image_present)
    return start_docker_subnet(templates=catalog)


def test_templates_are_listed_and_a_lease_runs_the_chosen_image(template_subnet, tmp_path: Path) -> None:
    net = template_subnet
    code, body = net.cli("operator_a", "templates", "--uid", str(net.miner_uid))
    assert code == EXIT_OK, body
    offered = body["miners"][0]["templates"]
    assert [(t["name"], t["default"]) for t in offered] == [("cpu", True), ("alt", False)]  # ghost dropped
    assert offered[1]["image"] == ALT and offered[1]["version"] == "1.0"

    pub = renter_key(tmp_path / "keys")
    code, body = net.cli("operator_a", "allocate", "--template", "alt", "--ssh-key", str(pub))
    assert code == EXIT_OK, body
    lease, command = body["lease"]["lease_id"], body["ssh_command"]
    assert ssh(command, "cat /etc/compute-template").stdout.strip() == "alt"
    code, body = net.cli("operator_a", "restart", lease)
    assert code == EXIT_OK, body
    assert ssh(command, "cat /etc/compute-template").stdout.strip() == "alt"  # same image after restart
    assert net.cli("operator_a", "deallocate", lease)[0] == EXIT_OK

    code, body = net.cli("operator_a", "allocate", "--ssh-key", str(pub))  # no template: the default
    assert code == EXIT_OK, body
    assert ssh(body["ssh_command"], "test -e /etc/compute-template").returncode == 1
    assert net.cli("operator_a", "deallocate", body["lease"]["lease_id"])[0] == EXIT_OK


def test_an_unknown_or_malformed_template_is_refused_clearly(template_subnet, tmp_path: Path) -> None:
    pub = renter_key(tmp_path / "keys")
    code, body = template_subnet.cli("operator_a", "allocate", "--template", "ghost", "--ssh-key", str(pub))
    assert code == EXIT_REFUSED and "ghost" in body["error"]["message"], body
    code, body = template_subnet.cli(
        "operator_a", "allocate", "--template", "Bad/Name", "--ssh-key", str(pub)
    )
    assert code == 2 and "not a template name" in body["error"]["message"]
