"""Shared fixtures: real wallets in temp dirs (no mocks of keys or signatures)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import bittensor as bt
import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C works as from a terminal. A run started in the background by a non-interactive shell
    (``cmd &``, ``nohup``) ignores SIGINT, Python then keeps ignoring it, and so does every child it
    starts: each test that presses Ctrl-C, in this process or in a child, would see nothing happen
    (an interrupted allocate that ends with 0). A handler, unlike SIG_IGN, is not inherited by exec."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def create_wallet(root: Path, name: str, hotkey: str = "default") -> bt.Wallet:
    """Create an unencrypted coldkey + hotkey under ``root`` (tests and the local demo only)."""
    wallet = bt.Wallet(name=name, hotkey=hotkey, path=str(root))
    wallet.create_new_coldkey(use_password=False, suppress=True, overwrite=True)
    wallet.create_new_hotkey(suppress=True, overwrite=True)
    return wallet


@pytest.fixture
def make_wallet(tmp_path: Path) -> Callable[..., bt.Wallet]:
    root = tmp_path / "wallets"

    def _make(name: str, hotkey: str = "default") -> bt.Wallet:
        return create_wallet(root, name, hotkey)

    return _make


@pytest.fixture(scope="module")
def second_engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A second Docker engine in its own network namespace, up for the module's tests and always
    taken down. Its addresses come from the module's ``SECOND_ENGINE_NET`` (default 17): modules that
    may run at once (``-n 3 --dist loadfile``) name different ones. Skipped without root, the tools
    or the base image; a failure with ``COMPUTE_REQUIRE_DOCKER=1``."""
    import os

    import docker

    from compute.allocation.docker.second_engine import IMAGE, SecondEngine, skip_reason

    reason = skip_reason()
    try:
        client = docker.from_env()
        client.images.get(IMAGE)
        client.close()
    except Exception as exc:
        reason = reason or f"local Docker engine or {IMAGE} missing: {exc}"
    if reason and os.environ.get("COMPUTE_REQUIRE_DOCKER") == "1":
        pytest.fail(f"COMPUTE_REQUIRE_DOCKER=1 but {reason}")
    if reason:
        pytest.skip(reason)
    engine = SecondEngine(
        tmp_path_factory.mktemp("engine2") / "d", net=getattr(request.module, "SECOND_ENGINE_NET", 17)
    )
    try:
        engine.up()
        yield engine
    finally:
        engine.down()  # namespace, daemon, containers, certs: gone even when the test failed


@pytest.fixture(scope="session", autouse=True)
def _release_lease_networks():
    """Docker tests that kill miners leave lease networks and firewall chains: remove unused ones."""
    yield
    try:
        import docker

        from compute.allocation.docker.netpolicy import release_unused_networks

        release_unused_networks(docker.from_env())
    except Exception:  # no engine, no permission: nothing was created either
        pass


BIG_FILE_BYTES = 64 * 1024**2


def release_disk(root: Path) -> None:
    """Unmount every filesystem left mounted below ``root`` (lease disks, volume images), then
    delete its files of 64 MiB or more: each Docker lease disk *reserves* its 5 GiB on the host, so
    a slow lane that kept its finished tests' images filled CI's disk and later leases were refused
    ("the miner's disk is full"). Unmounting first also keeps pytest's clean-up of old temp dirs
    from deleting files inside a live mount."""
    import os
    import subprocess

    prefix = str(root.resolve()) + "/"
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", point], capture_output=True, check=False)
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_blocks * 512 >= BIG_FILE_BYTES:
                os.unlink(path)
        except OSError:  # gone meanwhile, or still inside a busy mount: nothing more to free
            pass


@pytest.fixture(autouse=True)
def _release_disk_after(request: pytest.FixtureRequest):
    """After every test that had a ``tmp_path`` (its other fixtures torn down first): ``release_disk``."""
    yield
    tmp = getattr(request.node, "funcargs", {}).get("tmp_path")
    if isinstance(tmp, Path) and tmp.exists():
        release_disk(tmp)


@pytest.fixture
def slow_first_start(monkeypatch):
    """The embedded backend's first lease start takes 2.5 s, longer than a 1 s client timeout (the
    answer to the first allocate is lost); later starts are immediate. Yields the list of starts."""
    import asyncio

    from compute.allocation import EmbeddedBackend

    original = EmbeddedBackend.start
    calls: list[int] = []

    async def start(self, lease):
        calls.append(1)
        if len(calls) == 1:
            await asyncio.sleep(2.5)
        return await original(self, lease)

    monkeypatch.setattr(EmbeddedBackend, "start", start)
    return calls
