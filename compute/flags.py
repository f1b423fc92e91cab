"""Settings declared once: each field names its type, default, flag, help and environment variables.

``flag("wallet.name", "default", "coldkey wallet name", env=("BT_WALLET",))`` declares a field of
a :class:`Layered` model (pydantic-settings' ``BaseSettings``). From those fields ``add_flags`` adds
the argparse arguments — ``int``/``float`` fields get that ``type``, ``bool`` fields are switches,
every default is ``None`` — and ``Model.layered(ns, environ)`` builds the value with
pydantic-settings' sources in the order flag > process environment > ``.env`` > default: the parsed
flags are the init source, the environment is one source reading each field's own variables and
then ``COMPUTE_<FLAG>`` (``--a.b_c`` -> ``COMPUTE_A_B_C``; an empty variable counts as unset).
``environment`` merges the process environment over ``.env`` (``--env_file``, default ``./.env``),
read by ``load_dotenv``, which reports a malformed line instead of skipping it.

argparse stays the command line (not pydantic-settings' own CLI source): the entry points'
one-line errors (``compute.argv.Parser``), their ``--help`` and docs/cli.md are argparse's.

Deliberately not here: which flags a neuron has (each settings module declares its own), and
anything that touches ``os.environ`` beyond reading it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType, NoneType, UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

from dotenv.parser import parse_stream
from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

PREFIX = "COMPUTE_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_L = TypeVar("_L", bound="Layered")
_ENVIRON: ContextVar[Mapping[str, str]] = ContextVar("compute_flags_environ", default=MappingProxyType({}))


class SettingsError(ValueError):
    """A flag, variable or ``.env`` line has a bad value; the message names it."""


def flag(
    name: str | None,
    default: Any,
    help: str | None = None,
    *,
    env: tuple[str, ...] = (),
    nargs: str | None = None,
    **rules: Any,
) -> Any:
    """A field set by ``--name`` (None: by ``env`` only), else by ``env``, then ``COMPUTE_<NAME>``.

    ``{default}`` in ``help`` stands for the default (``30.0`` shows as ``30``).

    ``rules``: pydantic's ``Field`` constraints (``ge``, ``max_length``, ``default_factory``...).
    """
    if help is not None:  # the default written once: "(default {default})" in the help shows it
        shown = str(int(default)) if isinstance(default, float) and default.is_integer() else str(default)
        help = help.replace("{default}", shown)
    names = [*env, PREFIX + name.replace(".", "_").upper()] if name else list(env)
    extra: dict[str, Any] = {"flag": name, "env": names, "nargs": nargs}
    return Field(default, description=help, json_schema_extra=extra, **rules)


def _meta(info: FieldInfo) -> dict[str, Any]:
    extra = info.json_schema_extra
    return extra if isinstance(extra, dict) and "env" in extra else {}


def flagged(model: type[BaseSettings]) -> Iterator[tuple[str, str]]:
    """``(field, flag)`` of every field a flag sets, in declaration order."""
    for field, info in model.model_fields.items():
        if _meta(info).get("flag"):
            yield field, str(_meta(info)["flag"])


def add_flags(
    group: argparse._ActionsContainer, model: type[BaseSettings], prefixes: tuple[str, ...] = ("",)
) -> None:
    """One argument per flagged field of ``model`` (those whose flag starts with one of ``prefixes``).

    Every default is ``None``, so the environment, ``.env`` and the model's default can fill it.
    """
    for field, name in flagged(model):
        if not name.startswith(prefixes):
            continue
        info = model.model_fields[field]
        kind = info.annotation
        if get_origin(kind) in (Union, UnionType):
            kind = next(arg for arg in get_args(kind) if arg is not NoneType)
        extra: dict[str, Any] = {"nargs": _meta(info)["nargs"]} if _meta(info)["nargs"] else {}
        if kind is bool:
            extra.update(action="store_true", default=None)
        elif kind in (int, float):
            extra["type"] = kind
        group.add_argument(f"--{name}", help=info.description, **extra)


class _Environ(PydanticBaseSettingsSource):
    """Each field's first non-empty variable of the mapping ``Layered.layered`` was given."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        environ = _ENVIRON.get()
        value = next((environ[n] for n in _meta(field).get("env", ()) if environ.get(n)), None)
        return value, field_name, False

    def __call__(self) -> dict[str, Any]:
        fields = self.settings_cls.model_fields.items()
        found = {name: self.get_field_value(info, name)[0] for name, info in fields}
        return {name: value for name, value in found.items() if value is not None}


class Layered(BaseSettings):
    """A frozen settings model: parsed flags over an environment mapping over defaults."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _Environ(settings_cls)

    @field_validator("*", mode="before")
    @classmethod
    def _switch(cls, value: object, info: Any) -> object:
        """A bool field from text: 1/true/yes/on or 0/false/no/off (any case), else an error."""
        if cls.model_fields[info.field_name].annotation is bool and isinstance(value, str):
            text = value.strip().lower()
            if text not in _TRUE | _FALSE:
                raise ValueError(f"expected true/false, got {value!r}")
            return text in _TRUE
        return value

    @classmethod
    def layered(cls: type[_L], ns: argparse.Namespace, environ: Mapping[str, str], **values: Any) -> _L:
        """Flags set in ``ns`` over ``environ`` over defaults (``values``: fields built elsewhere).

        Raises :class:`SettingsError` naming the flag of each bad value.
        """
        given = {f: getattr(ns, name) for f, name in flagged(cls) if getattr(ns, name, None) is not None}
        token = _ENVIRON.set(environ)
        try:
            return cls(**given, **values)
        except ValidationError as exc:
            names = dict(flagged(cls))
            problems = (
                (f"--{names.get(str(e['loc'][0]), e['loc'][0])}: " if e["loc"] else "")
                + e["msg"].removeprefix("Value error, ")
                for e in exc.errors()
            )
            raise SettingsError("; ".join(problems)) from None
        finally:
            _ENVIRON.reset(token)


def load_dotenv(path: str | Path) -> dict[str, str]:
    """The ``KEY=VALUE`` pairs of ``path`` (missing file -> empty), parsed by python-dotenv.

    Never exports them (the process environment stays as it is) and never interpolates. A line
    python-dotenv cannot parse, or a bare key without ``=``, is a :class:`SettingsError` naming
    the file and line, instead of python-dotenv's default of warning and skipping it.
    """
    file = Path(path)
    if not file.is_file():
        return {}
    values: dict[str, str] = {}
    with file.open(encoding="utf-8") as stream:
        for binding in parse_stream(stream):
            if binding.error or (binding.key is not None and binding.value is None):
                text = binding.original.string
                number = binding.original.line + len(text) - len(text.lstrip("\n"))  # blank lines before
                raise SettingsError(f"{file}:{number}: expected KEY=VALUE, got {text.strip()!r}")
            if binding.key is not None and binding.value is not None:
                values[binding.key] = binding.value
    return values


def environment(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` if given, else the process environment over the ``.env`` named by ``--env_file``."""
    if env is not None:
        return dict(env)
    merged = load_dotenv(getattr(ns, "env_file", None) or ".env")
    merged.update(os.environ)
    return merged


__all__ = ["PREFIX", "Layered", "SettingsError", "add_flags", "environment", "flag", "flagged", "load_dotenv"]
