"""How ``register.py volumes`` shows a renter's persistent volumes: JSON dicts and a rich table."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table

from compute.operator.output import duration_text
from compute.operator.volumes import MinerVolumes
from compute.peertext import for_rich


def volumes_json(found: MinerVolumes) -> dict[str, Any]:
    return {
        "uid": found.uid,
        "hotkey": found.hotkey,
        "volumes": [v.model_dump() for v in found.volumes],
        "error": found.error,
    }


def show_volumes(console: Console, found: list[MinerVolumes], now: float | None = None) -> None:
    now = time.time() if now is None else now
    table = Table(title=f"Your volumes ({sum(len(f.volumes) for f in found)})")
    for column in ("UID", "Miner", "Volume", "Size (GB)", "Used (GB)", "Limit", "Attached to", "Kept for"):
        table.add_column(column)
    for miner in found:
        if miner.error is not None or not miner.volumes:
            note = f"[red]{for_rich(miner.error)}[/]" if miner.error else "[dim]none[/]"
            table.add_row(str(miner.uid), miner.hotkey[:12] + "…", note, "", "", "", "", "")
            continue
        for v in miner.volumes:
            used = "?" if v.used_gb is None else f"{v.used_gb:.2f}"
            if v.over_quota:
                used = f"[red]{used} (over)[/]"
            kept = "while attached" if v.expires_at is None else duration_text(v.expires_at - now)
            table.add_row(
                str(miner.uid),
                miner.hotkey[:12] + "…",
                for_rich(v.name),
                f"{v.size_gb:g}",
                used,
                v.quota,
                v.attached_lease or "-",
                kept,
            )
    console.print(table)
