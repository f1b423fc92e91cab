"""A Merkle tree (``compute.pog.merkle`` rules) over leaves that are all one filler but a few.

The fleet benchmark's prover commits to outputs it never computed in full: only the rows (or disk
blocks) it knows will be opened are real, every other leaf is one filler value. Building the whole
tree would cost a hash per leaf (131,072 for a 512 MB disk proof); here a level keeps only the nodes
above a real leaf plus its last node (the only one that may cover a partial, promoted range), and
every other node is the hash of a full filler subtree of that height. Same root and paths as
``MerkleTree(leaves)`` (tests compare them). Benchmark-only: a real prover has every leaf.
"""

from __future__ import annotations

from compute.pog.merkle import node_hash


class SparseMerkleTree:
    """``MerkleTree`` of ``count`` leaves, ``filler`` everywhere except ``leaves`` (index -> hash)."""

    def __init__(self, count: int, filler: bytes, leaves: dict[int, bytes]) -> None:
        if count < 1 or any(not 0 <= i < count for i in leaves):
            raise ValueError("a tree needs at least one leaf and indices inside it")
        self.count = count
        level = dict(leaves)
        level.setdefault(count - 1, filler)
        size, full = count, filler
        self.levels: list[tuple[int, bytes, dict[int, bytes]]] = []  # (size, full-subtree hash, nodes)
        while True:
            self.levels.append((size, full, level))
            if size == 1:
                break
            parent: dict[int, bytes] = {}
            for k in sorted({i // 2 for i in level}):
                left = level.get(2 * k, full)
                parent[k] = node_hash(left, level.get(2 * k + 1, full)) if 2 * k + 1 < size else left
            level, size, full = parent, (size + 1) // 2, node_hash(full, full)

    @property
    def root(self) -> bytes:
        return self.levels[-1][2][0]

    def path(self, index: int) -> list[bytes]:
        """Sibling hashes from the leaf upward (promoted levels contribute nothing)."""
        if not 0 <= index < self.count:
            raise IndexError(f"leaf index {index} out of range 0..{self.count - 1}")
        out = []
        for size, full, nodes in self.levels[:-1]:
            sibling = index ^ 1
            if sibling < size:
                out.append(nodes.get(sibling, full))
            index //= 2
        return out
