"""Fixtures for transport tests: real wallets, real uvicorn servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from compute.transport import KeyWallet, SignedServer, serve_in_thread


@pytest.fixture
def keys(make_wallet) -> Callable[[str], KeyWallet]:
    def _keys(name: str) -> KeyWallet:
        return KeyWallet.from_wallet(make_wallet(name))

    return _keys


@pytest.fixture
def start() -> Iterator[Callable[[SignedServer], str]]:
    running = []

    def _start(server: SignedServer) -> str:
        handle = serve_in_thread(server.app, "127.0.0.1", 0)
        running.append(handle)
        return f"127.0.0.1:{handle.port}"

    yield _start
    for handle in running:
        handle.request_stop()
    for handle in running:
        handle.stop()
