"""A proof's opening verified off the validator's event loop: the reply line as it came, to the pool.

``PogSession.*_line`` return the opening reply unparsed (a big one as the timing process's spool file); ``compute.pog.verify_pool`` parses and
verifies it in a worker process (big lines) or a thread (small ones), so the tens of milliseconds of
JSON, base64, hashing and recomputation per opening never hold this process's GIL while the event
loop has timestamps to take. A broken reply comes back as the session's own errors, with the
reasons ``worker_reply`` would have given: the worker's ``{"ok": false}`` is ``WorkerFailed``,
anything else malformed is ``WorkerProtocolError``.
"""

from __future__ import annotations

from compute.pog import MemoryVerdict, Verdict
from compute.pog.offload import ReplyError
from compute.pog.spool import SpooledLine
from compute.pog.verify_lines import verify_memory_line_async, verify_opening_line_async
from compute.validator.session.pog_session import WorkerFailed, WorkerProtocolError


def _session_error(exc: ReplyError) -> Exception:
    return WorkerFailed(str(exc)) if exc.failed else WorkerProtocolError(str(exc))


async def verify_opening(
    line: bytes | bytearray | SpooledLine, op: str, challenge, commitment, request, workers: int
) -> Verdict:
    """The verdict of a GEMM opening reply (``open``, ``sustained_open``)."""
    try:
        return await verify_opening_line_async(line, op, challenge, commitment, request, workers)
    except ReplyError as exc:
        raise _session_error(exc) from None


async def verify_memory(
    line: bytes | bytearray | SpooledLine,
    op: str,
    challenge,
    commitment,
    request,
    rows: list[list[int]],
    workers: int,
) -> MemoryVerdict:
    """The mathematics verdict of a memory opening reply (``memory_open``, ``ram_open``)."""
    try:
        return await verify_memory_line_async(line, op, challenge, commitment, request, rows, workers)
    except ReplyError as exc:
        raise _session_error(exc) from None
