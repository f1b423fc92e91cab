"""Parse one line the PoG worker sent: whatever the bytes, a parsed reply or a clean protocol error.

The worker runs on the miner's machine, so its output is hostile input. Every parser failure of
every kind (deep nesting -> ``RecursionError``, huge numbers -> ``OverflowError`` / ``ValueError``,
wrong types -> ``TypeError`` / ``AttributeError``, NaN or Infinity where an integer belongs,
truncated JSON, invalid UTF-8) becomes ``WorkerProtocolError("... malformed ...")``: the miner's
round fails with that reason (sample 0) and nothing escapes into the validator's round.
``WorkerFailed`` is the worker's own ``{"ok": false}`` answer.

Pure functions over bytes and dicts; the session (``pog_session``) reads the lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from compute import safejson
from compute.peertext import printable
from compute.safejson import PARSE_ERRORS

M = TypeVar("M", bound=BaseModel)

MAX_DEVICES = 64


class PogSessionError(Exception):
    """Root of the session's errors; ``str(error)`` is the reason recorded for the miner."""


class WorkerProtocolError(PogSessionError):
    """The far side broke the protocol: wrong digest, garbage, oversized or unexpected lines."""


class WorkerFailed(PogSessionError):
    """The worker answered ``{"ok": false}`` to a request."""


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    memory_bytes: int
    uuid: str = ""  # reported by the machine: a claim, used only to notice a swapped GPU set


def short(value: object, limit: int = 300) -> str:
    """``str(value)`` printable and cut to ``limit``; never raises (a hostile structure prints as its
    type). The worker's words reach the round table, the store and the log only through here."""
    return printable(value, limit)


def parse_json(raw: bytes | bytearray, op: str) -> dict:
    """One JSON object from a worker line, or ``WorkerProtocolError`` naming it malformed."""
    try:
        reply = safejson.loads(raw)
    except PARSE_ERRORS as exc:
        raise WorkerProtocolError(
            f"{op}: malformed worker line, not JSON ({type(exc).__name__}): {short(raw, 60)!r}"
        ) from None
    if not isinstance(reply, dict):
        raise WorkerProtocolError(f"{op}: malformed worker reply: not an object")
    return reply


def parse_reply(raw: bytes | bytearray, op: str) -> dict:
    """``parse_json`` plus the envelope: ``ok`` must be true and ``op`` must echo the request."""
    reply = parse_json(raw, op)
    if reply.get("ok") is not True:
        raise WorkerFailed(f"{op}: worker error: {short(reply.get('error'))}")
    if reply.get("op") != op:
        raise WorkerProtocolError(f"{op}: worker answered op {short(reply.get('op'), 30)!r}")
    return reply


def parse_model(model: type[M], value: object, op: str) -> M:
    """Validate a wire model; any failure is a malformed reply."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]["msg"] if exc.errors() else "invalid"
        raise WorkerProtocolError(f"{op}: malformed {model.__name__}: {short(first, 200)}") from None
    except PARSE_ERRORS as exc:
        raise WorkerProtocolError(f"{op}: malformed {model.__name__} ({type(exc).__name__})") from None


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} must be finite")
    number = int(value)
    if not -(2**63) <= number < 2**63:
        raise OverflowError(f"{what} out of range")
    return number


def parse_devices(reply: dict) -> list[DeviceInfo]:
    """The ``info`` reply's device list (1..64 entries, each index, name, memory bytes, uuid)."""
    devices = reply.get("devices")
    if not isinstance(devices, list) or not 1 <= len(devices) <= MAX_DEVICES:
        raise WorkerProtocolError(f"info: 'devices' must be a list of 1..{MAX_DEVICES} entries")
    try:
        return [
            DeviceInfo(
                _int(d["index"], "index"),
                short(d["name"], 128),
                max(0, _int(d["memory_bytes"], "memory_bytes")),
                short(d.get("uuid") or "", 128),
            )
            for d in devices
        ]
    except PARSE_ERRORS as exc:
        raise WorkerProtocolError(f"info: malformed device entry: {short(exc, 120)}") from None
