"""A hostile EVM JSON-RPC endpoint: a real TCP server on 127.0.0.1 that reads each request, then
misbehaves the way it is told. Every connection is counted, so a test sees the retries too.

- ``silent``: accepts, reads the request, never answers (holds the connection open)
- ``drip``: a valid-looking answer (status line, headers, a JSON-RPC body) one byte a second
- ``garbage``: bytes that are not HTTP at all
- ``not-json``: a well-formed HTTP 200 whose body is not JSON
- ``huge``: HTTP 200 with a 512 MiB body and no declared length, streamed from one 1 MiB buffer
- ``huge-declared``: the same with its length declared up front
- ``cut``: the status line, headers and half the body, then the connection closed
- ``nonsense``: a well-formed JSON-RPC answer to the very request whose result is no answer to it
- ``slow``: the honest answer of ``upstream`` (a real endpoint), each ``delay_s`` late
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field

import httpx

ANSWER = b'{"jsonrpc":"2.0","id":1,"result":"0x' + b"0" * 64 + b'"}'
HUGE = 512 * 1024 * 1024
_CHUNK = b"0" * (1024 * 1024)
MODES = ("silent", "drip", "garbage", "not-json", "huge", "huge-declared", "cut", "nonsense", "slow")


def _head(length: int | None) -> bytes:
    lines = [b"HTTP/1.1 200 OK", b"Content-Type: application/json"]
    lines.append(b"Content-Length: %d" % length if length is not None else b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


@dataclass
class HostileRpc:
    mode: str
    drip_s: float = 1.0
    upstream: str = ""  # slow: the endpoint whose answers are delayed
    delay_s: float = 0.0
    connections: int = 0
    sent: int = 0  # body bytes written (all connections)
    first_at: float | None = None  # time.monotonic() of the first connection accepted
    _stop: threading.Event = field(default_factory=threading.Event)
    _socks: list[socket.socket] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.mode in MODES, self.mode
        self._upstream = httpx.Client(timeout=30)  # one for every connection (thread-safe)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def __enter__(self) -> HostileRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._upstream.close()
        for sock in [self._listener, *self._socks]:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            if self.first_at is None:
                self.first_at = time.monotonic()
            self._socks.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            request = _read_request(conn)
            getattr(self, "_" + self.mode.replace("-", "_"))(conn, request)
        except (OSError, httpx.HTTPError):
            pass  # the client gave up (or, slow: the upstream stopped first): that is the point
        finally:
            if self.mode != "silent":
                conn.close()

    def _silent(self, conn: socket.socket, request: bytes) -> None:
        self._stop.wait()

    def _drip(self, conn: socket.socket, request: bytes) -> None:
        for byte in _head(len(ANSWER)) + ANSWER:
            if self._stop.wait(self.drip_s):
                return
            conn.sendall(bytes([byte]))
            self.sent += 1

    def _garbage(self, conn: socket.socket, request: bytes) -> None:
        conn.sendall(b"\x00\xff garbage \x1b[31m not HTTP\r\n\r\n" * 4)

    def _not_json(self, conn: socket.socket, request: bytes) -> None:
        body = b"<html>\x00\xffnot json</html>"
        conn.sendall(_head(len(body)) + body)

    def _huge(self, conn: socket.socket, request: bytes, declared: bool = False) -> None:
        conn.sendall(_head(HUGE if declared else None))
        while self.sent < HUGE and not self._stop.is_set():
            conn.sendall(_CHUNK)
            self.sent += len(_CHUNK)

    def _huge_declared(self, conn: socket.socket, request: bytes) -> None:
        self._huge(conn, request, declared=True)

    def _nonsense(self, conn: socket.socket, request: bytes) -> None:
        request_id = json.loads(request)["id"]
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": "0xzz\u202e\n"}).encode()
        conn.sendall(_head(len(body)) + body)

    def _slow(self, conn: socket.socket, request: bytes) -> None:
        if self._stop.wait(self.delay_s):
            return
        answer = self._upstream.post(
            self.upstream, content=request, headers={"Content-Type": "application/json"}
        )
        conn.sendall(_head(len(answer.content)) + answer.content)

    def _cut(self, conn: socket.socket, request: bytes) -> None:
        conn.sendall(_head(len(ANSWER)) + ANSWER[: len(ANSWER) // 2])


def _read_request(conn: socket.socket) -> bytes:
    """Read one HTTP request (headers, then the body its Content-Length declares): its body."""
    conn.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        body += chunk
    conn.settimeout(None)
    return body
