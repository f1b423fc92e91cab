"""Malformed worker output of every kind becomes a clean "malformed" protocol error (table-driven).

The unit table drives ``worker_reply`` (what ``PogSession`` parses every line with); the live cases
(deep nesting, Infinity where an int belongs, wrong types) run a cheating worker in a real lease in
``test_round.py::test_cheating_worker_scores_zero``.
"""

from __future__ import annotations

import pytest

from compute.pog import Commitment, MemoryCommitment, Opening
from compute.validator.session.worker_reply import (
    WorkerFailed,
    WorkerProtocolError,
    parse_devices,
    parse_json,
    parse_model,
    parse_reply,
    short,
)

DEEP = b"[" * 50_000 + b"]" * 50_000
DEEP_OBJECT = b'{"a":' * 50_000 + b"1" + b"}" * 50_000


@pytest.mark.parametrize(
    "raw",
    [
        DEEP,  # RecursionError in json.loads
        DEEP_OBJECT,
        b'{"ok":true,"op":"info","n":' + b"9" * 100_000 + b"}",  # int too long to convert: ValueError
        b'{"ok":true,"op":"info"',  # truncated
        b"\xff\xfe\x00garbage",  # not UTF-8
        b"",
        b"   \n",
        b"[1, 2, 3]",  # not an object
        b'"just a string"',
        b"NaN",
        b"1e999999",
        b"null",
    ],
)
def test_malformed_lines_are_protocol_errors(raw: bytes) -> None:
    with pytest.raises(WorkerProtocolError, match="malformed"):
        parse_json(raw, "commit")


@pytest.mark.parametrize(
    ("raw", "error", "match"),
    [
        (b'{"ok":false,"error":' + b"[" * 900 + b"]" * 900 + b"}", WorkerFailed, "worker error"),
        (b'{"ok":"true","op":"commit"}', WorkerFailed, "worker error"),
        (b'{"ok":true,"op":["commit"]}', WorkerProtocolError, "answered op"),
        (b'{"ok":true,"op":"open"}', WorkerProtocolError, "answered op"),
    ],
)
def test_reply_envelope_errors_are_clean(raw: bytes, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        parse_reply(raw, "commit")


@pytest.mark.parametrize(
    "devices",
    [
        None,
        [],
        "gpu0",
        ["gpu0", "gpu1"],  # wrong element type (AttributeError / TypeError)
        [{"index": 0, "name": "x"}],  # missing field
        [{"index": 0, "name": "x", "memory_bytes": float("inf")}],  # OverflowError in int()
        [{"index": 0, "name": "x", "memory_bytes": float("nan")}],
        [{"index": 10**400, "name": "x", "memory_bytes": 1}],  # huge int
        [{"index": "0", "name": "x", "memory_bytes": 1}],  # wrong type
        [{"index": True, "name": "x", "memory_bytes": 1}],
        [{"index": 0, "name": "x", "memory_bytes": 1}] * 65,  # too many
        [{"index": 0, "name": "x", "memory_bytes": 1, "uuid": 5}, 7],
    ],
)
def test_malformed_device_lists_are_protocol_errors(devices) -> None:
    with pytest.raises(WorkerProtocolError, match="info"):
        parse_devices({"devices": devices})


def test_well_formed_devices_parse_and_hostile_strings_are_cut() -> None:
    devices = parse_devices(
        {
            "devices": [
                {"index": 0, "name": "n" * 1000, "memory_bytes": -5, "uuid": None},
                {"index": 1.0, "name": 3, "memory_bytes": 2**40},
            ]
        }
    )
    assert [(d.index, len(d.name), d.memory_bytes, d.uuid) for d in devices] == [
        (0, 128, 0, ""),
        (1, 1, 2**40, ""),
    ]


@pytest.mark.parametrize("model", [Commitment, Opening, MemoryCommitment])
@pytest.mark.parametrize(
    "value",
    [None, 7, "x", [], {"challenge_id": 10**400}, {"challenge_id": float("nan")}, {"roots": [[[]]] * 1000}],
)
def test_malformed_wire_models_are_protocol_errors(model, value) -> None:
    with pytest.raises(WorkerProtocolError, match="malformed"):
        parse_model(model, value, "commit")


def test_short_never_raises() -> None:
    class Hostile:
        def __str__(self) -> str:
            raise RecursionError("deep")

    assert short(Hostile()) == "<unprintable Hostile>"
    assert short("x" * 1000, 10) == "x" * 10
