"""Host proofs, prover side (CPU cores, disk), run INSIDE the lease; host RAM is the memory proof on
device ``cpu`` (``memory.prover``).

- cpu: ``chains`` independent SHA-256 chains (step = sha256(previous digest || 16 KiB seeded
  block)), one per thread (hashlib releases the GIL on large buffers); each chain returns
  ``CPU_CHECKPOINTS`` evenly spaced digests, so the validator can check a few segments of a few chains
  without redoing the work, and the wall time on its clock shows how much ran in parallel.
- disk (protocol version 3), in two steps. ``disk_write``: a chain of 4 KiB blocks written to a file
  under ``path`` and fsynced; the reply is the Merkle root over the blocks' SHA-256 leaves. Each block
  depends on the FULL previous block and on one keyed random earlier block (``disk_block``):
  ``block_k = (pad(seed, k, block_{k-1}, block_{r(k)}) + block_{k-1}) xor block_{r(k)}`` in 64-bit
  words, the pad a SHAKE-256 expansion of a BLAKE2b digest of its inputs. Version 2 linked blocks through the previous block's leaf, which is what the Merkle
  tree keeps: a prover holding only the leaves (0.8 % of the data) rebuilt any block at once.
  ``disk_read`` (later in the round, indices chosen then): blocks k, k-1 and r(k) read back with
  their Merkle paths; the file is then deleted. A prover that kept no block (the leaves, or nothing)
  regenerates the whole chain up to k; one that kept some blocks regenerates the cone of the missing
  parents (``check.py`` says what a timely read therefore proves).

Stdlib + numpy only; embedded in the worker script. It verifies nothing (``host.check`` does).
"""

from __future__ import annotations

import base64
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..merkle import MerkleTree

PROBE_VERSION = 3
PROBE_TAG = b"compute-host-probe/%d" % PROBE_VERSION
CPU_BLOCK = 16 * 1024
CPU_CHECKPOINTS = 128
MAX_CHAINS = 256
MAX_CPU_STEPS = CPU_CHECKPOINTS * 4096
DISK_BLOCK = 4096
MAX_DISK_BYTES = 1 << 40
MAX_DISK_READS = 64


def seed_bytes(seed: object) -> bytes:
    if not isinstance(seed, str) or len(seed) != 32:
        raise ValueError("seed must be 32 hex characters")
    return bytes.fromhex(seed)


def cpu_block(seed: bytes) -> bytes:
    return hashlib.shake_256(PROBE_TAG + b"|cpu|" + seed).digest(CPU_BLOCK)


def chain_origin(seed: bytes, index: int) -> bytes:
    return hashlib.blake2b(PROBE_TAG + seed + int(index).to_bytes(4, "little"), digest_size=32).digest()


def chain_steps(digest: bytes, block: bytes, steps: int) -> bytes:
    for _ in range(steps):
        digest = hashlib.sha256(digest + block).digest()
    return digest


def _cpu_chain(seed: bytes, index: int, steps: int, block: bytes) -> list[str]:
    digest, out, per = chain_origin(seed, index), [], steps // CPU_CHECKPOINTS
    for _ in range(CPU_CHECKPOINTS):
        digest = chain_steps(digest, block, per)
        out.append(digest.hex())
    return out


def disk_parent(seed: bytes, index: int) -> int | None:
    """The random parent r(k) of block k >= 2: a keyed, uniform index in [0, k - 1); None below 2."""
    if index < 2:
        return None
    digest = hashlib.blake2b(PROBE_TAG + b"|parent|" + seed + int(index).to_bytes(8, "little"), digest_size=8)
    return int.from_bytes(digest.digest(), "little") % (index - 1)


def disk_block(seed: bytes, index: int, previous: bytes, parent: bytes) -> bytes:
    """``block_k``: a pad plus block_{k-1}, xor block_{r(k)}, in little-endian 64-bit words, where the
    pad is SHAKE-256 of the BLAKE2b digest of (seed, k, block_{k-1}, block_{r(k)}) (``b""`` for a
    parent block k does not have). BLAKE2b absorbs the parents at twice SHAKE's speed in CPython; the
    carry of ``+`` and the raw parents make a stored digest alone useless (the parents are needed)."""
    tag = PROBE_TAG + b"|disk|" + seed + int(index).to_bytes(8, "little")
    digest = hashlib.blake2b(tag + previous + parent).digest()
    words = np.frombuffer(hashlib.shake_256(digest).digest(DISK_BLOCK), dtype="<u8").copy()
    if previous:
        words += np.frombuffer(previous, dtype="<u8")  # wraps mod 2**64
    if parent:
        words ^= np.frombuffer(parent, dtype="<u8")
    return words.tobytes()


def block_opening(seed: bytes, indices: list[int]) -> list[int]:
    """Every block the validator needs to check ``indices``: each k with k - 1 and r(k), sorted."""
    needed = set(indices) | {k - 1 for k in indices if k > 0}
    needed |= {r for k in indices if (r := disk_parent(seed, k)) is not None}
    return sorted(needed)


def check_version(request: dict) -> None:
    """Refuse, by name, a request of another host probe protocol version."""
    if request.get("version") != PROBE_VERSION:
        raise ValueError(
            f"host probe version {request.get('version')!r} is not this worker's {PROBE_VERSION}"
        )


def block_leaf(block: bytes) -> bytes:
    return hashlib.sha256(block).digest()


def _bounded(request: dict, name: str, low: int, high: int) -> int:
    value = request.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}]")
    return value


def probe_cpu(request: dict) -> dict:
    check_version(request)
    seed = seed_bytes(request.get("seed"))
    chains = _bounded(request, "chains", 1, MAX_CHAINS)
    steps = _bounded(request, "steps", CPU_CHECKPOINTS, MAX_CPU_STEPS)
    if steps % CPU_CHECKPOINTS:
        raise ValueError(f"steps must be a multiple of {CPU_CHECKPOINTS}")
    block = cpu_block(seed)
    with ThreadPoolExecutor(max_workers=chains) as pool:
        checkpoints = list(pool.map(lambda k: _cpu_chain(seed, k, steps, block), range(chains)))
    return {"what": "cpu", "version": PROBE_VERSION, "checkpoints": checkpoints}


class DiskProbe:
    """Keeps the written file and its Merkle tree between ``write`` and ``read``."""

    def __init__(self) -> None:
        self._target: str | None = None
        self._tree: MerkleTree | None = None
        self._seed = b""

    def write(self, request: object) -> dict:
        if not isinstance(request, dict):
            raise ValueError("disk request must be an object")
        check_version(request)
        seed = seed_bytes(request.get("seed"))
        blocks = _bounded(request, "bytes", DISK_BLOCK, MAX_DISK_BYTES) // DISK_BLOCK
        path = request.get("path", ".")
        if not isinstance(path, str) or not os.path.isdir(path):
            raise ValueError("path must be an existing directory")
        self.discard()
        self._target, self._seed = os.path.join(path, f".compute-probe-{seed.hex()[:16]}"), seed
        leaves, previous = [], b""
        with open(self._target, "w+b", buffering=0) as handle:  # unbuffered: parents read back at once
            fd = handle.fileno()
            for k in range(blocks):
                parent = disk_parent(seed, k)
                parent_block = b"" if parent is None else os.pread(fd, DISK_BLOCK, parent * DISK_BLOCK)
                block = disk_block(seed, k, previous, parent_block)
                leaves.append(block_leaf(block))
                if handle.write(block) != DISK_BLOCK:
                    raise OSError(f"short write at block {k}")
                previous = block
            os.fsync(fd)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        self._tree = MerkleTree(leaves)
        return {
            "what": "disk",
            "version": PROBE_VERSION,
            "bytes": blocks * DISK_BLOCK,
            "root": self._tree.root.hex(),
        }

    def read(self, request: object) -> dict:
        if self._target is None or self._tree is None:
            raise ValueError("nothing written: send disk_write before disk_read")
        indices = request.get("blocks") if isinstance(request, dict) else None
        count = self._tree.leaf_count
        if not isinstance(indices, list) or not 1 <= len(indices) <= MAX_DISK_READS:
            raise ValueError(f"blocks must list 1..{MAX_DISK_READS} indices")
        if any(isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < count for k in indices):
            raise ValueError(f"block indices must be integers in [0, {count})")
        opened = []
        try:
            with open(self._target, "rb") as handle:
                for k in block_opening(self._seed, indices):
                    handle.seek(k * DISK_BLOCK)
                    data = handle.read(DISK_BLOCK)
                    path = [node.hex() for node in self._tree.path(k)]
                    opened.append({"index": k, "data": base64.b64encode(data).decode(), "path": path})
        finally:
            self.discard()
        return {"what": "disk", "version": PROBE_VERSION, "blocks": opened}

    def discard(self) -> None:
        if self._target is not None and os.path.exists(self._target):
            os.remove(self._target)
        self._target, self._tree = None, None
