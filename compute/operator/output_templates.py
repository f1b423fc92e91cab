"""How ``register.py templates`` shows the base images miners offer: JSON dicts and a rich table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from compute.operator.templates import MinerTemplates
from compute.peertext import for_rich


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
            note = f"[red]{for_rich(miner.error)}[/]" if miner.error else "[dim]none[/]"
            table.add_row(str(miner.uid), miner.hotkey[:12] + "…", note, "", "", "", "")
            continue
        for t in miner.templates:
            name = f"{for_rich(t.name)} [green](default)[/]" if t.default else for_rich(t.name)
            table.add_row(
                str(miner.uid),
                miner.hotkey[:12] + "…",
                name,
                t.kind,
                for_rich(t.version),
                for_rich(t.image),
                for_rich(t.description),
            )
    console.print(table)
