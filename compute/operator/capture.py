"""A command's output kept with a cap, in memory or in a temporary file, and JSON that streams it.

- ``Capture``: one stream kept in memory up to ``limit`` bytes (the SDK's ``run``); what comes
  after is counted and dropped (``truncated``), never held.
- ``Spool``: one stream kept in a temporary file up to ``limit`` bytes (``register.py exec --json``),
  so memory stays flat however much a command prints; ``json_pieces`` gives it back as one JSON
  string, decoded and escaped a chunk at a time.
- ``write_json(stream, value)``: ``json.dumps`` of ``value`` (sorted keys, indented), with every
  ``Spool`` inside written piece by piece instead of built as one string: a 64 MiB output costs a
  chunk of memory, not several copies of it (decoded, escaped, joined, encoded).

Deliberately not here: reading the output (``shell.LeaseShell.run`` writes into these).
"""

from __future__ import annotations

import codecs
import json
import re
import tempfile
from collections.abc import Iterator
from typing import IO, Any

CHUNK = 1024 * 1024
SPOOL_IN_MEMORY = 1024 * 1024  # a spool up to this size never touches the disk


class Capture:
    """Bytes of one output stream, the first ``limit`` of them kept in memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def write(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def value(self) -> bytes:
        """The kept bytes (the buffer is released: call once)."""
        data, self.data = bytes(self.data), bytearray()
        return data


class Spool:
    """Bytes of one output stream, the first ``limit`` of them kept in a temporary file."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.dropped = 0
        self._file: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115

    def write(self, chunk: bytes) -> None:
        room = self.limit - self.size
        if room > 0:
            kept = chunk[:room]
            self._file.write(kept)
            self.size += len(kept)
        self.dropped += max(0, len(chunk) - max(room, 0))

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def chunks(self) -> Iterator[bytes]:
        self._file.seek(0)
        while chunk := self._file.read(CHUNK):
            yield chunk

    def text(self) -> str:
        """The kept bytes as text (for small outputs: tables, tests)."""
        return b"".join(self.chunks()).decode("utf-8", errors="replace")

    def json_pieces(self) -> Iterator[str]:
        """The kept bytes as one JSON string literal (UTF-8, bad bytes replaced), in pieces."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        yield '"'
        for chunk in self.chunks():
            yield json.dumps(decoder.decode(chunk))[1:-1]
        yield json.dumps(decoder.decode(b"", final=True))[1:-1] + '"'

    def close(self) -> None:
        self._file.close()


_MARK = re.compile(r'"\\u0000spool(\d+)\\u0000"')


def write_json(stream: IO[str], value: Any) -> None:
    """``value`` as indented JSON with sorted keys, each ``Spool`` in it streamed (see above)."""
    spools: list[Spool] = []

    def mark(item: object) -> str:
        if not isinstance(item, Spool):
            raise TypeError(f"{type(item).__name__} is not JSON serialisable")
        spools.append(item)
        return f"\0spool{len(spools) - 1}\0"

    text = json.dumps(value, indent=2, sort_keys=True, default=mark)
    at = 0
    for found in _MARK.finditer(text):
        stream.write(text[at : found.start()])
        for piece in spools[int(found.group(1))].json_pieces():
            stream.write(piece)
        at = found.end()
    stream.write(text[at:] + "\n")


__all__ = ["Capture", "Spool", "write_json"]
