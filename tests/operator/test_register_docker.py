"""register.py against a real miner with the Docker backend: the same journey as the embedded test.

Skips without a Docker engine or the ``compute-base:cpu`` image (scripts/build_base_image.sh).
The machine has no GPU, so the lease is CPU-only; everything else (key-only SSH into a container,
pinned host key, extend, key exchange, second operator refused, deallocate) is the real thing.
"""

from __future__ import annotations

import os

import pytest
from flow import full_rental_flow

pytestmark = pytest.mark.docker


def test_docker_rental_lifecycle_allocate_ssh_extend_exchange_deallocate(docker_subnet, tmp_path):
    full_rental_flow(docker_subnet, tmp_path, gpu=False)


def test_resources_says_how_the_disk_size_is_held(docker_subnet):
    """Root here: each lease's writable layer is a filesystem of its size (``held``); without root
    the size is only watched (the backend accepts advisory sizes unless told to refuse them)."""
    code, body = docker_subnet.cli("operator_a", "resources")
    assert code == 0, body
    (machine,) = [m for m in body["machines"] if m["hotkey"] == docker_subnet.miner_hotkey]
    assert machine["disk_cap"] == ("kernel" if os.geteuid() == 0 else "watched")
