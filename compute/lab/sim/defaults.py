"""The validator's production defaults, read from its settings, so the simulators model what ships."""

from __future__ import annotations

from typing import Any


def validator_defaults() -> dict[str, Any]:
    """Every ``ValidatorSettings`` field's default, by name."""
    from compute.validator.settings import ValidatorSettings

    fields = ValidatorSettings.model_fields
    return {name: fields[name].default for name in fields if name != "common"}
