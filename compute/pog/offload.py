"""Big worker replies parsed and verified in one call, so a verification process can take the raw line.

An opening line is the largest thing a miner sends (a GEMM opening of 8 GPUs ~2.8 MB, a memory
opening ~38 MB at the H100 shape): parsing it (``json``), validating it (pydantic), decoding it
(base64) and hashing it hold the GIL for tens to hundreds of milliseconds. In the validator's process
that is time its event loop -- and every timestamp it takes -- waits. These functions take the raw
line and everything the validator chose (challenge, commitment already parsed, opening request,
checked rows) and return the verdict, so ``verify_pool`` can run them in a worker process: what
crosses is the line as an opaque ``bytes`` object inside a pickle this process wrote, and the verdict
back; nothing the miner wrote is ever unpickled.

The reply envelope is checked exactly as ``compute.validator.session.worker_reply`` checks it (the
same reasons, a test holds them equal); a broken reply raises ``ReplyError`` (``failed``: the
worker's own ``{"ok": false}``; else malformed), which the validator turns into its session errors.
"""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from compute import safejson
from compute.peertext import printable
from compute.safejson import PARSE_ERRORS

from .memory import MemoryOpening, MemoryVerdict, verify_memory
from .verifier import Verdict, verify
from .wire import Opening


class ReplyError(Exception):
    """A worker line that is not the expected reply; ``failed``: the worker answered ``ok: false``."""

    def __init__(self, message: str, failed: bool = False) -> None:
        super().__init__(message)
        self.failed = failed


def _short(value: object, limit: int = 300) -> str:
    return printable(value, limit)  # as ``worker_reply.short``: the miner's words, never raw


def parse_line(line: bytes | bytearray, op: str, key: str, model: type[BaseModel]) -> BaseModel:
    """The ``key`` field of the ``op`` reply in ``line`` as ``model`` (``ReplyError`` otherwise)."""
    try:
        reply = safejson.loads(line)
    except PARSE_ERRORS as exc:
        raise ReplyError(
            f"{op}: malformed worker line, not JSON ({type(exc).__name__}): {_short(line, 60)!r}"
        ) from None
    if not isinstance(reply, dict):
        raise ReplyError(f"{op}: malformed worker reply: not an object")
    if reply.get("ok") is not True:
        raise ReplyError(f"{op}: worker error: {_short(reply.get('error'))}", failed=True)
    if reply.get("op") != op:
        raise ReplyError(f"{op}: worker answered op {_short(reply.get('op'), 30)!r}")
    try:
        return model.model_validate(reply.get(key))
    except ValidationError as exc:
        first = exc.errors()[0]["msg"] if exc.errors() else "invalid"
        raise ReplyError(f"{op}: malformed {model.__name__}: {_short(first, 200)}") from None
    except PARSE_ERRORS as exc:
        raise ReplyError(f"{op}: malformed {model.__name__} ({type(exc).__name__})") from None


def verify_opening_line(line: bytes | bytearray, op: str, challenge, commitment, request) -> Verdict:
    """``verify`` of the GEMM opening in the ``op`` reply line (``open``, ``sustained_open``)."""
    opening = parse_line(line, op, "opening", Opening)
    return verify(challenge, commitment, request, opening)


def verify_memory_line(
    line: bytes | bytearray, op: str, challenge, commitment, request, rows: list[list[int]]
) -> MemoryVerdict:
    """``verify_memory`` of the memory opening in the ``op`` reply line (``memory_open``, ``ram_open``)."""
    opening = parse_line(line, op, "opening", MemoryOpening)
    return verify_memory(challenge, commitment, request, opening, rows=rows)  # type: ignore[arg-type]
