"""How ``register.py templates`` shows the base images miners offer: JSON dicts and a rich table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compute.operator.templates import MinerTemplates


def templates_json(found: MinerTemplates) -> dict[str, Any]:
    return {
        "uid": found.uid,
        "hotkey": found.hotkey,
        "templates": [t.model_dump() for t in found.templates],
        "error": found.error,
    }


def show_templates(console: Console, found: list[MinerTemplates]) -> None:
    table = Table(title=f"Templates offered ({sum(len(f.templates) for f in found)})")
    for column in ("UID", "Hotkey", "Template", "Kind", "Version", "Image", "Description"):
        table.add_column(column)
    for miner in found:
        if miner.error is not None or not miner.templates:
            note = f"[red]{escape(miner.error)}[/]" if miner.error else "[dim]none[/]"
            table.add_row(str(miner.uid), miner.hotkey[:12] + "…", note, "", "", "", "")
            continue
        for t in miner.templates:
            name = f"{escape(t.name)} [green](default)[/]" if t.default else escape(t.name)
            table.add_row(
                str(miner.uid),
                miner.hotkey[:12] + "…",
                name,
                t.kind,
                escape(t.version),
                escape(t.image),
                escape(t.description),
            )
    console.print(table)
