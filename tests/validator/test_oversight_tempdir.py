"""A validator built without a canary directory (tests, benchmarks) leaves none behind."""

from __future__ import annotations

import gc

from bittensor.sp_core import Keypair

from compute.transport import KeyWallet, MinerClient
from compute.validator.fleet.oversight import Oversight


async def test_the_temporary_canary_directory_goes_with_its_oversight() -> None:
    client = MinerClient(KeyWallet(Keypair.create_from_uri("//TempCanary")))
    oversight = Oversight()
    oversight.canaries(client)
    directories = [path for path in _canary_dirs() if (path / client.hotkey[:16]).exists()]
    assert directories, "the oversight made no directory of its own"
    del oversight
    gc.collect()
    assert not any(path.exists() for path in directories), directories
    await client.aclose()


def _canary_dirs():
    import tempfile
    from pathlib import Path

    return list(Path(tempfile.gettempdir()).glob("compute-canary-*"))
