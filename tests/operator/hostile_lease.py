"""A hostile lease: a real SSH server (asyncssh, pinned host key, the lease's key only) that answers
keep-alives but misbehaves where a renter's tools wait on it.

It runs in a thread of its own (its own event loop), so ``register.py`` (in-process ``main``) and
the SDK talk to it over real TCP exactly as to a miner's lease. Its SFTP is rooted at ``files``;
switches, set by the test at any time:

- ``stall_read_after`` / ``stall_write_after``: SFTP reads (writes) reaching past this offset never
  answer, until ``resume()`` (the connection stays alive);
- ``drip_s``: every SFTP read answers one byte after this pause;
- ``claimed_size``: ``stat`` says files are this big;
- ``names``: a listing (``scandir``) of these names instead of the directory's;
- ``no_sftp`` (at construction): the SFTP subsystem is refused (the ``cat`` fallback), and
  ``exec cat`` sends ``cat_bytes`` then stalls;
- exec ``print N``: N bytes of ``y`` on stdout (``random N``: random bytes); ``eof-no-exit``: closes its output, never exits.

``served`` records the offset of every SFTP read answered (a resumed copy asks only the rest).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import asyncssh

from compute.operator import BookEntry, LeaseBook, write_known_hosts
from compute.protocol import SshAccess


class _Sftp(asyncssh.SFTPServer):
    def __init__(self, chan: Any, lease: HostileLease) -> None:
        super().__init__(chan, chroot=str(lease.files).encode())
        self.lease = lease

    async def _gate(self, end: int, limit: int | None) -> None:
        if limit is not None and end > limit:
            self.lease.stalled.set()
            await self.lease.gate.wait()

    async def read(self, file_obj: object, offset: int, size: int) -> bytes:
        lease = self.lease
        if lease.drip_s:
            await asyncio.sleep(lease.drip_s)
            size = min(size, 1)
        await self._gate(offset + size, lease.stall_read_after)
        data = super().read(file_obj, offset, size)
        lease.served.append(offset)
        return data  # type: ignore[return-value]

    async def write(self, file_obj: object, offset: int, data: bytes) -> int:
        await self._gate(offset + len(data), self.lease.stall_write_after)
        return super().write(file_obj, offset, data)  # type: ignore[return-value]

    def stat(self, path: bytes) -> asyncssh.SFTPAttrs:
        attrs = asyncssh.SFTPAttrs.from_local(super().stat(path))  # type: ignore[arg-type]
        if self.lease.claimed_size is not None and attrs.type == asyncssh.FILEXFER_TYPE_REGULAR:
            attrs.size = self.lease.claimed_size
        return attrs

    async def scandir(self, path: bytes):  # noqa: ANN201 - asyncssh's async iterator
        if self.lease.names is None:
            async for entry in super().scandir(path):
                yield entry
            return
        for name in self.lease.names:
            yield asyncssh.SFTPName(
                name.encode(), attrs=asyncssh.SFTPAttrs(type=asyncssh.FILEXFER_TYPE_REGULAR, size=1)
            )


class HostileLease:
    def __init__(self, root: Path, owner_hotkey: str, book_dir: Path, no_sftp: bool = False) -> None:
        self.files = root / "lease-files"
        self.files.mkdir(parents=True)
        self.stall_read_after: int | None = None
        self.stall_write_after: int | None = None
        self.drip_s = 0.0
        self.claimed_size: int | None = None
        self.names: list[str] | None = None
        self.no_sftp = no_sftp
        self.cat_bytes = 100_000
        self.served: list[int] = []
        self.stalled = threading.Event()  # a request reached a stall
        self.lease_id = uuid.uuid4().hex
        self._host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.private_key = root / "lease-key"
        self.private_key.write_bytes(client_key.export_private_key())
        self.private_key.chmod(0o600)
        self._authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
        self._loop = asyncio.new_event_loop()
        self.gate = asyncio.Event()
        self.port = 0
        started = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self._thread.start()
        assert started.wait(10), "the hostile lease did not start"
        host_key = self._host_key.export_public_key().decode().strip()
        access = SshAccess(host="127.0.0.1", port=self.port, username="lease", host_key=host_key)
        known = write_known_hosts(book_dir / "known_hosts", self.lease_id, access)
        now = time.time()
        self.entry = BookEntry(
            self.lease_id, owner_hotkey, "sim:none", 27, 1, "5" + "M" * 47, "127.0.0.1:1", "active", False,
            "CPU", {}, "127.0.0.1", self.port, "lease", host_key, {}, str(known), str(self.private_key),
            client_key.export_public_key().decode().strip(), False, now, now + 3600, now,
        )  # fmt: skip
        LeaseBook(book_dir / "leases.db").save(self.entry)

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)

        def sftp(chan: Any) -> Any:
            return _Sftp(chan, self)

        async def start() -> None:
            for _ in range(20):
                self.port = random.randrange(20_000, 60_000)
                try:
                    self._server = await asyncssh.create_server(
                        lambda: _Server(self),
                        "127.0.0.1",
                        self.port,
                        server_host_keys=[self._host_key],
                        authorized_client_keys=self._authorized,
                        sftp_factory=None if self.no_sftp else sftp,
                        process_factory=self._process,
                        allow_scp=False,
                        encoding=None,
                    )
                    break
                except OSError:
                    continue
            started.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    async def _process(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command or ""
        if command.startswith(("print ", "random ")):
            left = int(command.split()[1])
            while left > 0:
                chunk = b"y" * 65536 if command.startswith("print") else os.urandom(65536)
                process.stdout.write(chunk[:left])
                left -= len(chunk)
                await process.stdout.drain()
            process.exit(0)
        elif command == "eof-no-exit":
            process.stdout.write(b"done\n")
            process.stdout.write_eof()
            await self.gate.wait()
        elif command.startswith("exec cat "):
            process.stdout.write(os.urandom(self.cat_bytes))
            await process.stdout.drain()
            self.stalled.set()
            await self.gate.wait()
            process.exit(0)
        else:
            process.exit(0)

    def resume(self) -> None:
        """Stalled requests answer (and later ones pass)."""
        self.stall_read_after = self.stall_write_after = None
        self._loop.call_soon_threadsafe(self.gate.set)

    def close(self) -> None:
        self.resume()

        def stop() -> None:
            self._server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.call_later(0.1, self._loop.stop)

        self._loop.call_soon_threadsafe(stop)
        self._thread.join(10)


class _Server(asyncssh.SSHServer):
    def __init__(self, lease: HostileLease) -> None:
        self.lease = lease

    def session_requested(self) -> Any:
        return True

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn


__all__ = ["HostileLease"]
