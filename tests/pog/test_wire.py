"""Wire models: bounded, strict, validated before decoding."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from pydantic import ValidationError

from compute.pog import (
    B64Array,
    Challenge,
    Commitment,
    Opening,
    OpeningRequest,
    WireError,
    new_challenge,
    parse_message,
)
from compute.pog.wire import MAX_ARRAY_ELEMENTS


def _b64(values: np.ndarray) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def test_array_round_trips_little_endian() -> None:
    values = np.array([1.5, -2.0, 3.25], dtype=np.float32)
    array = B64Array.from_numpy(values)
    assert array.shape == [3] and array.data == _b64(values)
    assert np.array_equal(B64Array.model_validate_json(array.model_dump_json()).to_numpy(), values)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"dtype": "<f4", "shape": [4], "data": _b64(np.zeros(3))}, "needs"),
        ({"dtype": "<f8", "shape": [3], "data": _b64(np.zeros(3))}, "dtype"),
        ({"dtype": "<f4", "shape": [3], "data": _b64([1.0, float("nan"), 2.0])}, "NaN"),
        ({"dtype": "<f4", "shape": [2], "data": _b64([1.0, float("inf")])}, "NaN or infinity"),
        ({"dtype": "<f4", "shape": [2], "data": "!!!!!!!!!!!!"}, "base64"),
        ({"dtype": "<f4", "shape": [2], "data": _b64([1, 2]), "extra": 1}, "Extra inputs"),
        ({"dtype": "<f4", "shape": [MAX_ARRAY_ELEMENTS + 1], "data": ""}, "less than or equal"),
        ({"dtype": "<f4", "shape": [300, 300], "data": ""}, "exceeds the limit"),
    ],
)
def test_bad_arrays_are_rejected_with_a_reason(payload: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        B64Array.model_validate(payload)


def test_oversized_payload_is_rejected_before_decoding() -> None:
    huge = "A" * (8 * MAX_ARRAY_ELEMENTS)
    with pytest.raises(ValidationError, match="base64 payload has"):
        B64Array.model_validate({"dtype": "<f4", "shape": [4], "data": huge})


def test_message_size_limit_applies_before_parsing() -> None:
    challenge = new_challenge("fp16", 8, 16, 8, 1)
    raw = challenge.model_dump_json()
    assert parse_message(Challenge, raw) == challenge
    with pytest.raises(WireError, match="exceeds the limit"):
        parse_message(Challenge, raw, max_bytes=len(raw) - 1)
    with pytest.raises(WireError, match="invalid Challenge"):
        parse_message(Challenge, raw.replace('"fp16"', '"fp64"'))


@pytest.mark.parametrize(
    "change",
    [
        {"challenge_id": "AB" * 16},
        {"key": "ab" * 15},
        {"m": 0},
        {"p": 70000},
        {"gpu_count": 17},
        {"m": 65536, "p": 65536},
        {"surprise": True},
    ],
)
def test_bad_challenges_are_rejected(change: dict) -> None:
    fields = new_challenge("fp32", 8, 16, 8, 1).model_dump() | change
    with pytest.raises(ValidationError):
        Challenge.model_validate(fields)


def test_commitment_roots_must_be_sha256_hex() -> None:
    good = {"challenge_id": "ab" * 16, "roots": ["cd" * 32]}
    assert Commitment.model_validate(good).roots == ["cd" * 32]
    with pytest.raises(ValidationError):
        Commitment.model_validate(good | {"roots": ["cd" * 31]})
    with pytest.raises(ValidationError):
        Commitment.model_validate(good | {"roots": []})


def test_opening_request_indices_are_distinct_and_bounded() -> None:
    base = {"challenge_id": "ab" * 16, "rows": [[1, 2]], "cols": [[[0], [0, 5]]]}
    OpeningRequest.model_validate(base)
    for rows in ([[1, 1]], [[-1]], [[]], [list(range(65))]):
        with pytest.raises(ValidationError):
            OpeningRequest.model_validate(base | {"rows": rows})
    # one column list per opened row, each distinct and bounded
    for cols in ([[[0]]], [[[0], [1, 1]]], [[[0], []]], [[[0], list(range(65))]], [[0, 1]]):
        with pytest.raises(ValidationError):
            OpeningRequest.model_validate(base | {"cols": cols})


@pytest.mark.parametrize("model", [Challenge, Commitment, OpeningRequest, Opening])
@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,  # deep nesting
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        b'{"challenge_id":' + b"9" * 100_000 + b"}",  # huge int
        b'{"m":1e999999}',
        b'{"challenge_id":NaN,"roots":Infinity}',
        b'{"kind":"pog.commitment","challenge_id":"ab',  # truncated
        b"\xff\xfe\x00",  # not UTF-8
        b'{"per_gpu":[{"rows":[{"index":"0","row":[],"path":{}}]}]}',  # wrong types
        b"",
        b"null",
    ],
)
def test_malformed_messages_are_wire_errors(model, raw: bytes) -> None:
    with pytest.raises(WireError, match="malformed"):
        parse_message(model, raw)
