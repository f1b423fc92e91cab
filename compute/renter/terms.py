"""Lease terms as the SDK takes them: ``ttl`` ("2h", "90m", seconds) or ``until`` (a datetime, Unix
seconds, or the CLI's ``--until`` text), and ``idle_after``; checked like ``register.py`` checks its
flags (the same functions), so the SDK and the CLI accept and refuse the same values."""

from __future__ import annotations

import time
from datetime import datetime

from compute.operator.commands import idle_after as parse_idle_after
from compute.operator.commands import parse_duration


def _text(value: str | float | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return f"{float(value):.3f}"


def term_seconds(
    ttl: str | float | None,
    until: str | float | datetime | None,
    *,
    base: float | None = None,
    default: int | None = 3600,
) -> int:
    """Seconds of lease term from ``ttl`` or ``until`` (counted from ``base``: a lease's current end
    when extending), bounded like the protocol; ``ConfigError`` for a bad or contradictory value."""
    moment = until.timestamp() if isinstance(until, datetime) else until
    return parse_duration(
        None, None, default, ttl=_text(ttl), until=_text(moment), now=time.time(), base=base
    )


def idle_seconds(idle_after: str | float | None) -> int | None:
    """``idle_after`` ("2h", seconds) as the miner's idle stop, at least ten minutes."""
    return parse_idle_after(_text(idle_after)) if idle_after is not None else None


__all__ = ["idle_seconds", "term_seconds"]
