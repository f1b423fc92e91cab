"""JSON from peers with a nesting bound that does not depend on the interpreter's recursion limit.

``json.loads`` guards deep nesting only through ``sys.getrecursionlimit()``, and libraries raise
that limit for themselves (py-evm sets 12,288, py_ecc 100,000 at import): in a process that
imported them, a peer's line nested 50,000 deep parses, and one deep enough overflows the C stack
and kills the process. ``loads`` counts the nesting first (vectorised, in bounded chunks) and
refuses anything deeper than ``max_depth`` before the parser sees it.

Brackets inside strings are counted too, so the bound is conservative: a string holding more than
``max_depth`` unbalanced opening brackets is refused (no peer message here carries one).
``MAX_DEPTH`` keeps what an interpreter with the default limit parses; honest messages nest < 10.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

MAX_DEPTH = 1000  # CPython's default recursion limit: no default interpreter parses deeper
_CHUNK = 1 << 20
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


# everything a parser or a conversion can raise on hostile data (MemoryError included: a reply is
# bounded by the line limit, but a pathological structure must not take the validator down)
PARSE_ERRORS = (
    ValueError,
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
    RecursionError,
    OverflowError,
    MemoryError,
)


class TooDeep(ValueError):
    """The JSON text nests deeper than allowed."""


def nesting_depth(raw: bytes | bytearray | memoryview) -> int:
    """The deepest bracket nesting of ``raw`` (brackets in strings counted)."""
    view = np.frombuffer(raw, dtype=np.uint8)
    deepest = depth = 0
    for start in range(0, view.size, _CHUNK):
        chunk = view[start : start + _CHUNK]
        folded = chunk | np.uint8(0x20)  # "[" -> "{", "]" -> "}": two compares find all four
        brackets = chunk[np.flatnonzero((folded == 0x7B) | (folded == 0x7D))]
        if brackets.size == 0:  # a base64 opening of 38 MB: ~10 ms, not ~350 ms of table look-ups
            continue
        levels = np.cumsum(_STEP[brackets], dtype=np.int64) + depth
        deepest = max(deepest, int(levels.max()))
        depth = int(levels[-1])
    return deepest


def loads(raw: bytes | bytearray | str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` of ``raw``, refusing (``TooDeep``, a ``ValueError``) nesting past ``max_depth``."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    # nesting never exceeds the opening brackets: a text with few of them (every worker line, 2,048
    # memory pass lines per 8-GPU chain) skips the vectorised count, ~40 us a line
    if data.count(b"[") + data.count(b"{") > max_depth:
        depth = nesting_depth(data)
        if depth > max_depth:
            raise TooDeep(f"JSON nested {depth} deep, more than {max_depth}")
    return json.loads(data)
