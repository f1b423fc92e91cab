"""The committed contract artifact: ABI and bytecode by contract name (see ``build``)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from compute.collateral.build import ARTIFACT
from compute.collateral.errors import BuildError


@dataclass(frozen=True)
class Compiled:
    name: str
    abi: list[dict[str, Any]]
    bytecode: str


@functools.cache
def _load() -> dict[str, Any]:
    try:
        return json.loads(ARTIFACT.read_text())
    except (OSError, ValueError) as error:
        raise BuildError(f"cannot read the contract artifact {ARTIFACT}: {error}") from error


def compiled(name: str) -> Compiled:
    contracts = _load()["contracts"]
    if name not in contracts:
        raise BuildError(f"no contract {name!r} in {ARTIFACT} (have {sorted(contracts)})")
    unit = contracts[name]
    return Compiled(name, unit["abi"], unit["bytecode"])


def compiler_version() -> str:
    return str(_load()["compiler"])
