"""The simulated miners' line encoder: JSON whose big base64 payloads are copied, never scanned.

A memory opening of an 8-GPU miner is ~36 MB of base64 in one line. ``json.dumps`` scans every
character of it for escapes (~0.1 s holding the GIL per opening), and the simulated miners' one
process plays 2,048 GPUs: while it encoded, the other sessions' pass lines left late, and the
validator rightly failed those chains as begun late. ``B64`` holds what ``base64.b64encode`` returned
(its alphabet needs no escape), and ``encode_line`` writes it as a JSON string, copied once.
Benchmark-only: the real worker writes with ``json.dumps``; the bytes on the wire are the same.
"""

from __future__ import annotations

import base64
import json
from functools import lru_cache

import numpy as np


class B64:
    """Base64 text, kept as the bytes written (the alphabet needs no JSON escape)."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    @classmethod
    def of(cls, data: bytes) -> B64:
        return cls(base64.b64encode(data))


@lru_cache(maxsize=16)
def zeros_b64(count: int, dtype: str) -> B64:
    """The base64 of ``count`` zero elements of ``dtype`` (most vectors a simulated opening sends)."""
    return B64.of(np.zeros(count, dtype=dtype).tobytes())


SPARSE = 64  # at most this many non-zero elements: patch the zeros' base64 instead of encoding


def array_json(values: np.ndarray, dtype: str) -> dict:
    """The wire form of a 1-D array (``compute.pog.wire``). The prover's vectors are zeros but for
    the few opened entries: their base64 is the zeros' (cached) with the 4-character groups over
    those entries re-encoded, which ``b64encode`` of the whole would spend ~1 ms (GIL held) on."""
    data = np.ascontiguousarray(values, dtype=dtype)
    nonzero = np.flatnonzero(data)
    if not len(nonzero):
        return {"dtype": dtype, "shape": [len(data)], "data": zeros_b64(len(data), dtype)}
    if len(nonzero) > SPARSE:
        return {"dtype": dtype, "shape": [len(data)], "data": B64.of(data.tobytes())}
    raw, size = data.view(np.uint8), data.itemsize
    text = bytearray(zeros_b64(len(data), dtype).raw)
    groups = {g for e in nonzero.tolist() for g in range(e * size // 3, (e * size + size - 1) // 3 + 1)}
    for g in groups:
        text[4 * g : 4 * g + 4] = base64.b64encode(raw[3 * g : 3 * g + 3].tobytes())
    return {"dtype": dtype, "shape": [len(data)], "data": B64(bytes(text))}


def _encode(value: object, parts: list[bytes]) -> None:
    if isinstance(value, B64):
        parts += (b'"', value.raw, b'"')
    elif isinstance(value, dict):
        parts.append(b"{")
        for k, (key, item) in enumerate(value.items()):
            if k:
                parts.append(b",")
            name = key if isinstance(key, str) else json.dumps(key)  # json's own key coercion
            parts += (json.dumps(name).encode(), b":")
            _encode(item, parts)
        parts.append(b"}")
    elif isinstance(value, list | tuple):
        parts.append(b"[")
        for k, item in enumerate(value):
            if k:
                parts.append(b",")
            _encode(item, parts)
        parts.append(b"]")
    else:
        parts.append(json.dumps(value, separators=(",", ":")).encode())


def encode_line(line: dict) -> bytes:
    """The line as ``json.dumps(line, separators=(",", ":"))`` writes it (a ``B64`` as its text),
    newline-terminated."""
    parts: list[bytes] = []
    _encode(line, parts)
    parts.append(b"\n")
    return b"".join(parts)
