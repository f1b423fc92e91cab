"""Merkle commitment over rows: paths for every size, odd-node promotion, tampering."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from compute.pog.merkle import MerkleTree, hash_rows, leaf_hash, node_hash, root_from_path

CID = bytes(range(16))


def _leaves(count: int) -> list[bytes]:
    return [hashlib.sha256(bytes([k])).digest() for k in range(count)]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33])
def test_every_path_leads_to_the_root(count: int) -> None:
    tree = MerkleTree(_leaves(count))
    for index, leaf in enumerate(_leaves(count)):
        assert root_from_path(leaf, index, count, tree.path(index)) == tree.root


def test_odd_node_is_promoted_not_duplicated() -> None:
    a, b, c = _leaves(3)
    assert MerkleTree([a, b, c]).root == node_hash(node_hash(a, b), c)
    assert MerkleTree([a, b, c]).root != MerkleTree([a, b, c, c]).root


def test_leaf_layout_is_domain_separated() -> None:
    row = np.arange(4, dtype=np.float32)
    expected = hashlib.sha256(
        b"\x00" + CID + (2).to_bytes(4, "little") + (7).to_bytes(8, "little") + row.astype("<f4").tobytes()
    ).digest()
    assert leaf_hash(CID, 2, 7, row) == expected
    assert leaf_hash(CID, 3, 7, row) != expected
    assert leaf_hash(CID, 2, 8, row) != expected


def test_threaded_row_hashing_matches_sequential() -> None:
    matrix = np.random.default_rng(0).standard_normal((300, 40)).astype(np.float32)
    expected = [leaf_hash(CID, 1, i, matrix[i]) for i in range(300)]
    assert hash_rows(CID, 1, matrix, threads=4) == expected


def test_tampered_paths_do_not_reach_the_root() -> None:
    count = 13
    leaves = _leaves(count)
    tree = MerkleTree(leaves)
    path = tree.path(6)
    assert root_from_path(leaves[6], 6, count, path[:-1]) is None  # truncated
    assert root_from_path(leaves[6], 6, count, path + [path[0]]) is None  # extended
    assert root_from_path(leaves[6], 6, count, [b"\x00" * 31] + path[1:]) is None  # short node
    forged = [bytes(32)] + path[1:]
    assert root_from_path(leaves[6], 6, count, forged) != tree.root
    assert root_from_path(leaves[6], 7, count, path) != tree.root  # wrong index
    assert root_from_path(leaves[6], count, count, path) is None  # out of range
    assert root_from_path(leaves[5], 6, count, path) != tree.root


def test_path_of_missing_leaf_is_an_error() -> None:
    with pytest.raises(IndexError):
        MerkleTree(_leaves(3)).path(3)
    with pytest.raises(ValueError):
        MerkleTree([])


def test_row_blocks_hashed_from_a_start_leaf_are_the_whole_matrix_leaves() -> None:
    matrix = np.arange(300 * 8, dtype=np.float32).reshape(300, 8)
    whole = hash_rows(b"c" * 16, 3, matrix, threads=2)
    blocks = hash_rows(b"c" * 16, 3, matrix[:130], threads=2) + hash_rows(
        b"c" * 16, 3, matrix[130:], threads=2, start=130
    )
    assert blocks == whole
