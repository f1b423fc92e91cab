"""Opening reply lines verified in the pool without holding this process's GIL on the way there.

A line big enough to matter comes from the timing process already in a spool file (``spool``,
``SpooledLine``): the worker reads the file and runs the ``offload`` function on it, and this
process deletes the file when the call returns, whatever happened -- the line is never in this
process's memory. A line given as bytes past ``FILE_MIN_LINE`` is written to such a file first
(``os.write`` releases the GIL while the kernel copies, where pickling 38 MB into the pool's pipe
would hold it for milliseconds at a time). A proof is sent to the pool when its line or its
recomputation is big (``pooled``), else it is verified in a thread here (a spooled line read back
there).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from .offload import verify_memory_line, verify_opening_line
from .spool import SpooledLine, spool_root
from .verify_pool import POOL_MIN_ELEMENTS, shared_pool

POOL_MIN_LINE = 1 << 18  # a line this big is parsed and verified in the pool whatever its work
FILE_MIN_LINE = 1 << 20  # a line this big reaches the worker through a file, not the pipe
Line = bytes | bytearray | SpooledLine


def _write(line: bytes | bytearray) -> str:
    """A new temporary file holding ``line`` (tmpfs when available); its path."""
    fd, path = tempfile.mkstemp(prefix="compute-line-", dir=spool_root())
    try:
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]  # the GIL is released while the kernel copies
    finally:
        os.close(fd)
    return path


def from_file(fn, path: str, *args):
    """In the worker: ``fn(line, *args)`` with the line read back from ``path``."""
    return fn(Path(path).read_bytes(), *args)


async def _call(fn, line: Line, args: tuple, workers: int, work: int):
    pool = shared_pool(workers)
    pooled = len(line) >= POOL_MIN_LINE or work >= POOL_MIN_ELEMENTS
    if isinstance(line, SpooledLine):
        try:
            return await pool.call(from_file, fn, line.path, *args, pooled=pooled)
        finally:
            await asyncio.to_thread(line.discard)
    if not pooled or workers == 0 or len(line) < FILE_MIN_LINE:
        return await pool.call(fn, line, *args, pooled=pooled)
    path = await asyncio.to_thread(_write, line)  # off the loop: the kernel copy takes milliseconds
    try:
        return await pool.call(from_file, fn, path, *args)
    finally:
        await asyncio.to_thread(os.unlink, path)


async def verify_opening_line_async(line: Line, op: str, challenge, commitment, request, workers: int = 0):
    """``offload.verify_opening_line`` in the pool or a thread (``offload.ReplyError`` on a broken
    reply): parse, Merkle paths and recomputation all run off this process's GIL."""
    work = sum(
        (len(rows) + sum(len(c) for c in cols))
        for rows, cols in zip(request.rows, request.cols, strict=False)
    )
    return await _call(
        verify_opening_line, line, (op, challenge, commitment, request), workers, work * challenge.n
    )


async def verify_memory_line_async(
    line: Line, op: str, challenge, commitment, request, rows: list[list[int]], workers: int = 0
):
    """``offload.verify_memory_line`` in the pool or a thread (``offload.ReplyError`` on a broken reply)."""
    work = sum(len(r) for r in rows) * challenge.n * challenge.hash_rounds
    return await _call(verify_memory_line, line, (op, challenge, commitment, request, rows), workers, work)
