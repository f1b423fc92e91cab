"""Lease templates: the catalog file, its errors, the default, and the additive wire fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from compute.allocation.docker.templates import (
    TemplateCatalog,
    TemplateError,
    UnknownTemplate,
    default_catalog,
    load_templates,
)
from compute.protocol import AllocateRequest, Requirements, TemplatesRequest, route_for

REPO = Path(__file__).resolve().parents[2]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "templates.yaml"
    path.write_text(text)
    return path


def test_shipped_catalog_offers_pytorch_cuda_and_cpu_with_pytorch_default() -> None:
    catalog = load_templates(REPO / "config" / "templates.yaml", "ignored:tag")
    assert [(t.name, t.kind) for t in catalog.templates] == [
        ("pytorch", "cuda-pytorch"),
        ("cuda", "cuda"),
        ("cpu", "cpu"),
    ]
    assert catalog.resolve(None).name == "pytorch" and catalog.resolve(None).default
    assert catalog.resolve("cpu").image == "compute-base:cpu" and catalog.resolve("cpu").version


def test_without_a_file_the_base_image_is_the_only_default_template() -> None:
    catalog = load_templates(None, "compute-base:cpu")
    assert catalog == default_catalog("compute-base:cpu")
    only = catalog.resolve(None)
    assert (only.name, only.image, only.kind, only.default) == ("default", "compute-base:cpu", "cpu", True)
    with pytest.raises(UnknownTemplate, match="'pytorch' is not offered here"):
        catalog.resolve("pytorch")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("templates: [", "is not YAML"),
        ("templates: []", "templates"),
        ("- just a list", "templates file"),
        ("templates:\n  - {name: a, image: x:1, kind: gpu}", "kind"),
        ("templates:\n  - {name: Bad Name, image: x:1, kind: cpu}", "name"),
        ("templates:\n  - {name: a, image: 'x; rm -rf /', kind: cpu}", "image"),
        ("templates:\n  - {name: a, image: x:1, kind: cpu, colour: red}", "colour"),
        ("templates:\n  - {name: a, image: x:1, kind: cpu}\n  - {name: a, image: y:1, kind: cpu}", "repeat"),
        ("default: b\ntemplates:\n  - {name: a, image: x:1, kind: cpu}", "default 'b' is not one of"),
    ],
)
def test_bad_template_files_are_refused_with_the_file_and_the_problem(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TemplateError, match=problem) as info:
        load_templates(path, "compute-base:cpu")
    assert str(path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="cannot read templates file"):
        load_templates(tmp_path / "nope.yaml", "compute-base:cpu")


def test_templates_whose_image_is_missing_are_dropped_but_never_the_default(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "default: a\ntemplates:\n"
        "  - {name: a, image: 'gone:1', kind: cpu}\n"
        "  - {name: b, image: 'here:1', kind: cuda}\n"
        "  - {name: c, image: 'gone:2', kind: cuda}\n",
    )
    catalog = load_templates(path, "compute-base:cpu").present(lambda image: image.startswith("here"))
    assert [t.name for t in catalog.templates] == ["a", "b"]
    assert isinstance(catalog, TemplateCatalog) and catalog.default == "a"


def test_template_field_is_additive_on_the_wire() -> None:
    plain = AllocateRequest(requirements=Requirements(), duration_s=3600, ssh_public_key=KEY)
    assert "template" not in plain.model_dump_json()  # an old miner still parses it
    old_json = '{"gpu_count": 0, "cpu_count": 1, "memory_gb": 1.0, "disk_gb": 5.0, "extra_ports": 0}'
    assert Requirements.model_validate_json(old_json).template is None
    named = Requirements(template="cpu")
    assert Requirements.model_validate_json(named.model_dump_json()).template == "cpu"
    with pytest.raises(ValueError):
        Requirements(template="../etc")
    assert route_for(TemplatesRequest())[0] == "/v1/templates"
