"""Lease templates: the base images a miner offers (CUDA + PyTorch, plain CUDA, CPU), with versions.

A catalog comes from a YAML file (``--miner.templates``, see ``config/templates.yaml``) or, without
one, is the single template ``default`` on ``--miner.base_image``, so a miner that configures
nothing keeps working as before. ``resolve(None)`` is the default template; an unknown name is a
clear ``UnknownTemplate``. ``present(check)`` keeps only templates whose image the engine holds (a
lease never pulls at rental time), and never drops the default: a miner whose default image is
missing must not start (``compute.miner.service.check_image``).

Deliberately not here: pulling or building images, or choosing hardware.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compute.protocol import ImageRef, TemplateInfo, TemplateName

log = logging.getLogger(__name__)

DEFAULT_NAME = "default"


class TemplateError(ValueError):
    """A templates file that cannot be used; the message names the file and the problem."""


class UnknownTemplate(LookupError):
    """A lease asked for a template this miner does not offer."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: TemplateName
    image: ImageRef
    version: str = Field("", max_length=64)
    kind: str = Field(pattern=r"^(cuda-pytorch|cuda|cpu)$")
    description: str = Field("", max_length=200)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: TemplateName | None = None
    templates: list[_Entry] = Field(min_length=1, max_length=64)


@dataclass(frozen=True)
class TemplateCatalog:
    """The templates a miner offers; ``default`` names the one used when a lease names none."""

    templates: tuple[TemplateInfo, ...]
    default: str

    def resolve(self, name: str | None) -> TemplateInfo:
        wanted = name or self.default
        for template in self.templates:
            if template.name == wanted:
                return template
        offered = ", ".join(t.name for t in self.templates)
        raise UnknownTemplate(f"template {wanted!r} is not offered here (offered: {offered})")

    def present(self, has_image: Callable[[str], bool]) -> TemplateCatalog:
        """Only the templates whose image is available (the default is always kept)."""
        kept = []
        for template in self.templates:
            if template.name == self.default or has_image(template.image):
                kept.append(template)
            else:
                log.warning(
                    "template %s dropped: image %s is not on this engine", template.name, template.image
                )
        return TemplateCatalog(tuple(kept), self.default)


def _kind_of(image: str) -> str:
    return "cpu" if image.endswith(":cpu") else "cuda-pytorch"


def default_catalog(base_image: str) -> TemplateCatalog:
    """One template, ``default``, on the miner's base image (what a miner without a file offers)."""
    template = TemplateInfo(name=DEFAULT_NAME, image=base_image, kind=_kind_of(base_image), default=True)
    return TemplateCatalog((template,), DEFAULT_NAME)


def load_templates(path: str | Path | None, base_image: str) -> TemplateCatalog:
    """The catalog in ``path`` (YAML), or ``default_catalog(base_image)`` when ``path`` is None."""
    if path is None:
        return default_catalog(base_image)
    file = Path(path).expanduser()
    try:
        raw = yaml.safe_load(file.read_text())
        parsed = _File.model_validate(raw)
    except OSError as exc:
        raise TemplateError(f"cannot read templates file {file}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise TemplateError(f"templates file {file} is not YAML: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise TemplateError(f"templates file {file}: {problems}") from exc
    names = [entry.name for entry in parsed.templates]
    if len(set(names)) != len(names):
        raise TemplateError(f"templates file {file}: template names repeat: {names}")
    default = parsed.default or names[0]
    if default not in names:
        raise TemplateError(f"templates file {file}: default {default!r} is not one of {names}")
    templates = tuple(
        TemplateInfo(**entry.model_dump(), default=entry.name == default)  # type: ignore[arg-type]
        for entry in parsed.templates
    )
    return TemplateCatalog(templates, default)
