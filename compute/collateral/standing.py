"""What a validator last read of each miner's collateral, published beside its store for its feed.

The validator's credit reads every scored miner's deposit from the contract when weights are set
(``compute.validator.collateral.credit``) and writes what it read here
(``<data_dir>/collateral/standing.json``, atomically); the dashboard's public machine feed
(``compute.dashboard.feed``) shows it per machine, so a renter sees a miner's standing deposit and
pending reclaim before renting. The figures are the contract's, as this validator read them and
when: a renter can read the same on chain (``register.py --collateral.rpc``). Pure: files only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FILE = "standing.json"


class PublishedStanding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    deposit_wei: int = Field(ge=0)
    pending_reclaim_wei: int = Field(ge=0)
    reclaim_at: int = Field(0, ge=0)  # chain time the pending reclaim matures (0: none)
    read_at: float = Field(ge=0)  # when this validator read it (its clock)


def standing_path(data_dir: Path) -> Path:
    return Path(data_dir) / "collateral" / FILE


def write_standing(path: Path, standing: Mapping[str, PublishedStanding]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {hotkey: s.model_dump() for hotkey, s in sorted(standing.items())}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def read_standing(path: Path) -> dict[str, PublishedStanding]:
    """hotkey -> standing (empty when absent or unreadable: the feed then shows none)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[str, PublishedStanding] = {}
    for hotkey, value in raw.items() if isinstance(raw, dict) else ():
        try:
            out[str(hotkey)] = PublishedStanding.model_validate(value)
        except ValidationError:
            continue
    return out


__all__ = ["FILE", "PublishedStanding", "read_standing", "standing_path", "write_standing"]
