"""Host proofs, prover side (CPU cores, disk), run INSIDE the lease; host RAM is the memory proof on
device ``cpu`` (``memory.prover``).

- cpu: ``chains`` independent SHA-256 chains (step = sha256(previous digest || 16 KiB seeded
  block)), one per thread (hashlib releases the GIL on large buffers); each chain returns
  ``CPU_CHECKPOINTS`` evenly spaced digests, so the validator can check a few segments of a few chains
  without redoing the work, and the wall time on its clock shows how much ran in parallel.
- disk, in two steps. ``disk_write``: a sequential chain of 4 KiB blocks (``block_k`` = SHAKE-256 of
  the seed, k and the SHA-256 leaf of ``block_{k-1}``) written to a file under ``path`` and fsynced;
  the reply is the Merkle root over the leaves. ``disk_read`` (later in the round, indices chosen
  then): blocks k-1 and k read back from the file with their Merkle paths; the file is then deleted.
  A prover that did not keep the file must regenerate the chain up to k, one block after another.

Stdlib + numpy only; embedded in the worker script. It verifies nothing (``host.check`` does).
"""

from __future__ import annotations

import base64
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

from ..merkle import MerkleTree

PROBE_TAG = b"compute-host-probe/2"
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


def disk_block(seed: bytes, index: int, previous_leaf: bytes) -> bytes:
    tag = PROBE_TAG + b"|disk|" + seed + int(index).to_bytes(8, "little") + previous_leaf
    return hashlib.shake_256(tag).digest(DISK_BLOCK)


def block_leaf(block: bytes) -> bytes:
    return hashlib.sha256(block).digest()


def _bounded(request: dict, name: str, low: int, high: int) -> int:
    value = request.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}]")
    return value


def probe_cpu(request: dict) -> dict:
    seed = seed_bytes(request.get("seed"))
    chains = _bounded(request, "chains", 1, MAX_CHAINS)
    steps = _bounded(request, "steps", CPU_CHECKPOINTS, MAX_CPU_STEPS)
    if steps % CPU_CHECKPOINTS:
        raise ValueError(f"steps must be a multiple of {CPU_CHECKPOINTS}")
    block = cpu_block(seed)
    with ThreadPoolExecutor(max_workers=chains) as pool:
        checkpoints = list(pool.map(lambda k: _cpu_chain(seed, k, steps, block), range(chains)))
    return {"what": "cpu", "checkpoints": checkpoints}


class DiskProbe:
    """Keeps the written file and its Merkle tree between ``write`` and ``read``."""

    def __init__(self) -> None:
        self._target: str | None = None
        self._tree: MerkleTree | None = None

    def write(self, request: object) -> dict:
        if not isinstance(request, dict):
            raise ValueError("disk request must be an object")
        seed = seed_bytes(request.get("seed"))
        blocks = _bounded(request, "bytes", DISK_BLOCK, MAX_DISK_BYTES) // DISK_BLOCK
        path = request.get("path", ".")
        if not isinstance(path, str) or not os.path.isdir(path):
            raise ValueError("path must be an existing directory")
        self.discard()
        self._target = os.path.join(path, f".compute-probe-{seed.hex()[:16]}")
        leaves, leaf = [], b""
        with open(self._target, "wb") as handle:
            for k in range(blocks):
                block = disk_block(seed, k, leaf)
                leaf = block_leaf(block)
                leaves.append(leaf)
                handle.write(block)
            handle.flush()
            os.fsync(handle.fileno())
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        self._tree = MerkleTree(leaves)
        return {"what": "disk", "bytes": blocks * DISK_BLOCK, "root": self._tree.root.hex()}

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
                for k in sorted(set(indices) | {k - 1 for k in indices if k > 0}):
                    handle.seek(k * DISK_BLOCK)
                    data = handle.read(DISK_BLOCK)
                    path = [node.hex() for node in self._tree.path(k)]
                    opened.append({"index": k, "data": base64.b64encode(data).decode(), "path": path})
        finally:
            self.discard()
        return {"what": "disk", "blocks": opened}

    def discard(self) -> None:
        if self._target is not None and os.path.exists(self._target):
            os.remove(self._target)
        self._target, self._tree = None, None
