"""Peer JSON keeps its nesting bound when a library raised the recursion limit (py-evm, py_ecc do)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest

from compute import safejson
from compute.validator.session.worker_reply import WorkerProtocolError, parse_json


@pytest.fixture
def raised_recursion_limit() -> Iterator[None]:
    """What importing py_ecc does to the process: a recursion limit of 100,000."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


@pytest.mark.parametrize("opening", [b"[", b'{"a":'])
def test_deep_nesting_is_refused_whatever_the_recursion_limit(raised_recursion_limit, opening) -> None:
    closing = b"]" if opening == b"[" else b"}"
    deep = opening * 50_000 + b"1" + closing * 50_000
    with pytest.raises(safejson.TooDeep):
        safejson.loads(deep)
    with pytest.raises(WorkerProtocolError, match="malformed"):
        parse_json(deep, "commit")


def test_the_bound_is_exact_and_holds_across_chunk_boundaries(monkeypatch) -> None:
    monkeypatch.setattr(safejson, "_CHUNK", 7)  # many chunks, depth carried across each boundary
    text = "[" * 64 + "0" + "]" * 64
    assert safejson.loads(text, max_depth=64) == json.loads(text)
    assert safejson.nesting_depth(("[" * 65 + "]" * 65).encode()) == 65
    with pytest.raises(safejson.TooDeep, match="65 deep"):
        safejson.loads("[" * 65 + "]" * 65, max_depth=64)


def test_ordinary_replies_parse_as_json_does() -> None:
    for text in ['{"ok": true, "op": "info", "devices": [{"index": 0}]}', "[]", "{}", '"s"', "3", ""]:
        try:
            expected = json.loads(text)
        except ValueError:
            with pytest.raises(ValueError):
                safejson.loads(text)
            continue
        assert safejson.loads(text) == expected
    assert safejson.loads(b"[1,2]") == [1, 2]


def test_a_text_with_fewer_opening_brackets_than_the_bound_is_not_counted(monkeypatch) -> None:
    """Nesting never exceeds the opening brackets, so a worker line with a handful of them parses
    without the vectorised count; one with more than the bound is still counted, flat or deep."""
    counted: list[int] = []
    real = safejson.nesting_depth
    monkeypatch.setattr(safejson, "nesting_depth", lambda raw: counted.append(len(raw)) or real(raw))
    line = b'{"op":"memory_pass","ok":true,"gpu":3,"pass":17}\n'
    assert safejson.loads(line) == json.loads(line) and counted == []
    flat = "[" + ",".join(["[]"] * 64) + "]"  # 65 opening brackets, nested 2 deep
    assert safejson.loads(flat, max_depth=64) == json.loads(flat) and counted == [len(flat)]
    with pytest.raises(safejson.TooDeep, match="65 deep"):
        safejson.loads("[" * 65 + "]" * 65, max_depth=64)
    assert safejson.loads("[" * 64 + "]" * 64, max_depth=64) == json.loads("[" * 64 + "]" * 64)
