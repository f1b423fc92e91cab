"""Merkle commitment over the rows of a GEMM output.

Leaf ``i`` = SHA-256(0x00 || challenge id (16 bytes) || gpu index (4 bytes LE) || i (8 bytes LE)
|| row bytes, float32 little-endian); node = SHA-256(0x01 || left || right). A node without a
sibling is promoted unchanged to the next level (no duplication), so no two trees share a root.
Row hashing runs in threads over row blocks (hashlib releases the GIL on large buffers).

Stdlib and numpy only; embedded verbatim in the worker script. It neither computes nor
transports rows.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HASH_BYTES = 32
LEAF_TAG = b"\x00"
NODE_TAG = b"\x01"


def leaf_hash(challenge_id: bytes, gpu_index: int, row_index: int, row: np.ndarray) -> bytes:
    """Hash of one row; ``row`` must be 1-D float32 (converted to little-endian bytes)."""
    data = np.ascontiguousarray(row, dtype="<f4")
    h = hashlib.sha256(
        LEAF_TAG + challenge_id + int(gpu_index).to_bytes(4, "little") + int(row_index).to_bytes(8, "little")
    )
    h.update(data.data.cast("B"))  # ndarray.data: the buffer memoryview(data) would give
    return h.digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_TAG + left + right).digest()


def _leaf_block(challenge_id: bytes, gpu_index: int, rows: np.ndarray, start: int) -> list[bytes]:
    """``leaf_hash`` of each row of a contiguous float32 block, without per-row array conversions."""
    prefix = LEAF_TAG + challenge_id + int(gpu_index).to_bytes(4, "little")
    flat = np.ascontiguousarray(rows, dtype="<f4").reshape(-1).view(np.uint8).data  # a flat byte view
    width = rows.shape[1] * 4 if rows.ndim == 2 else 0
    out = []
    for k in range(len(rows)):
        h = hashlib.sha256(prefix + (start + k).to_bytes(8, "little"))
        h.update(flat[k * width : (k + 1) * width])
        out.append(h.digest())
    return out


def hash_rows(
    challenge_id: bytes, gpu_index: int, matrix: np.ndarray, threads: int = 4, start: int = 0
) -> list[bytes]:
    """Leaf hashes of every row of ``matrix`` (2-D float32), in threads over row blocks.

    ``start``: the leaf index of the first row (a block of a larger output, hashed as it arrives).
    """
    matrix = np.ascontiguousarray(matrix, dtype="<f4")
    m = matrix.shape[0]
    threads = max(1, min(threads, m // 64 or 1))
    if threads == 1:
        return _leaf_block(challenge_id, gpu_index, matrix, start)
    bounds = [m * k // threads for k in range(threads + 1)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        parts = pool.map(
            lambda k: _leaf_block(
                challenge_id, gpu_index, matrix[bounds[k] : bounds[k + 1]], start + bounds[k]
            ),
            range(threads),
        )
        return [leaf for part in parts for leaf in part]


class MerkleTree:
    """All levels of the tree, leaves first; ``root`` and ``path(index)``."""

    def __init__(self, leaves: list[bytes]) -> None:
        if not leaves:
            raise ValueError("a Merkle tree needs at least one leaf")
        levels = [list(leaves)]
        while len(levels[-1]) > 1:
            level = levels[-1]
            parent = [node_hash(level[k], level[k + 1]) for k in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                parent.append(level[-1])
            levels.append(parent)
        self.levels = levels

    @property
    def root(self) -> bytes:
        return self.levels[-1][0]

    @property
    def leaf_count(self) -> int:
        return len(self.levels[0])

    def path(self, index: int) -> list[bytes]:
        """Sibling hashes from the leaf upward; promoted levels contribute nothing."""
        if not 0 <= index < self.leaf_count:
            raise IndexError(f"leaf index {index} out of range 0..{self.leaf_count - 1}")
        out = []
        for level in self.levels[:-1]:
            sibling = index ^ 1
            if sibling < len(level):
                out.append(level[sibling])
            index //= 2
        return out


def root_from_path(leaf: bytes, index: int, leaf_count: int, path: list[bytes]) -> bytes | None:
    """Root implied by ``leaf`` at ``index`` and ``path``, or None when the path is malformed."""
    if not 0 <= index < leaf_count or any(len(node) != HASH_BYTES for node in path):
        return None
    node, used, size = leaf, 0, leaf_count
    while size > 1:
        if index % 2 == 1 or index + 1 < size:
            if used >= len(path):
                return None
            sibling = path[used]
            used += 1
            node = node_hash(sibling, node) if index % 2 else node_hash(node, sibling)
        index //= 2
        size = (size + 1) // 2
    return node if used == len(path) else None
