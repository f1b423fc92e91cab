"""A Docker engine that turns slow (test code only): a unix-socket proxy in front of the real one.

``SlowEngine(path)`` listens on ``path`` and passes every byte to ``/var/run/docker.sock`` and
back while ``mode`` is ``pass``; in ``drip`` it sends the engine's answers one byte a second, in
``silent`` it sends nothing back at all. The mode can change at any time, as a real host turns
slow or goes quiet while the miner runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

ENGINE = "/var/run/docker.sock"


class SlowEngine:
    def __init__(self, path: Path, mode: str = "pass") -> None:
        self.path, self.mode = path, mode
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    @property
    def endpoint(self) -> str:
        return f"unix://{self.path}"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_unix_server(self._client, str(self.path)))
        ready.set()
        self.loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(ENGINE)
        except OSError:
            writer.close()
            return
        forward = asyncio.ensure_future(self._pipe(reader, up_writer, slow=False))
        backward = asyncio.ensure_future(self._pipe(up_reader, writer, slow=True))
        await asyncio.wait([forward, backward], return_when=asyncio.FIRST_COMPLETED)
        for task in (forward, backward):
            task.cancel()
        for w in (writer, up_writer):
            with contextlib.suppress(Exception):
                w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slow: bool) -> None:
        while data := await reader.read(65536):
            if not slow or self.mode == "pass":
                writer.write(data)
                await writer.drain()
                continue
            for byte in data:
                while self.mode == "silent":
                    await asyncio.sleep(0.2)
                if self.mode == "drip":
                    await asyncio.sleep(1.0)
                writer.write(bytes([byte]))
                await writer.drain()

    async def _shutdown(self) -> None:
        self.server.close()
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.loop.stop()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop)
        self.thread.join(5)
