"""How a lab command prints its figures: one JSON object with ``--json``, else a two-column table."""

from __future__ import annotations

import json
import sys
from typing import Any


def emit(figures: dict[str, Any], as_json: bool, title: str) -> None:
    if as_json:
        sys.stdout.write(json.dumps(figures, default=str) + "\n")
        return
    table(title, figures)


def table(title: str, figures: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Table(title=title)
    out.add_column("metric")
    out.add_column("value", justify="right")
    for key, value in figures.items():
        out.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    Console().print(out)
