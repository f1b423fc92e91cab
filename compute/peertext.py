"""Text that came from a peer, made safe to show: printable characters only, bounded length.

A miner's answers, a worker's error, a dashboard's figures and a renter's request are written by
someone else. Shown raw, their control characters (ESC sequences, carriage returns, bidi
overrides, line separators) repaint the operator's terminal, forge log lines or hide text. Every
peer-supplied string passes :func:`printable` once, at the boundary where it is parsed: the
protocol's text fields (:data:`PeerText`), the worker's replies, the dashboard's JSON, the
transport's error texts. ``compute.logs`` applies it once more to every log line it writes.

Rich markup is a second language inside the text: ``[/]`` or ``[red]`` in a peer's string would be
read as a tag by ``Console.print`` (a ``MarkupError``, or restyled output). :func:`for_rich` is
:func:`printable` plus rich's own escaping, for every peer string placed in a rich table or line.

What it deliberately does not do: reject text (a refusal reason with an odd character is still a
refusal), or change text it does not need to (printable text is returned as is).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from annotated_types import GroupedMetadata, MaxLen
from pydantic import AfterValidator


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: object, limit: int | None = None) -> str:
    """``text`` with every non-printable character shown as its escape (``\\x1b``), cut to ``limit``.

    Non-printable is Python's definition: control characters (C0, C1, DEL), format characters
    (bidi overrides, zero-width joiners), line and paragraph separators, surrogates and unassigned
    code points; a plain space is printable. Never raises (an object that cannot be shown prints as
    its type)."""
    if not isinstance(text, str):
        try:
            text = str(text)
        except Exception:  # noqa: BLE001 - str() of hostile data must not escape
            text = f"<unprintable {type(text).__name__}>"
    if not text.isprintable():
        text = "".join(char if char.isprintable() else _escape(char) for char in text)
    return text if limit is None else text[: max(0, limit)]


def for_rich(text: object, limit: int | None = None) -> str:
    """:func:`printable`, then escaped for rich markup: safe inside ``Console.print`` and tables."""
    from rich.markup import escape

    return escape(printable(text, limit))


@dataclass(frozen=True)
class PeerText(GroupedMetadata):
    """Field metadata for peer text, ``Annotated[str, PeerText(128)]``: at most ``max_length``
    characters as received, kept :func:`printable` (cut back to ``max_length`` if escapes grew it)."""

    max_length: int

    def __iter__(self) -> Iterator[Any]:
        yield MaxLen(self.max_length)
        yield AfterValidator(lambda value: printable(value, self.max_length))


__all__ = ["PeerText", "for_rich", "printable"]
