"""Keyed shards of an interconnect proof and the exact sum every participant must end up holding.

Participant ``r`` of a challenge with master key ``K`` owns the shard keyed by
``generator.subkey(K, r)`` (the Proof-of-GPU derivation; ``r`` takes the GPU index's place), which
the validator reveals to that participant alone when its clock starts. The shard is ``chunks``
rows of ``chunk_len`` 32-bit words: word ``(c, j)`` is ``fmix32(row_value(c) + column_value(j))``
with row and column values from ``generator.index_values`` over the shard's ``matrix_seeds`` --
the Proof-of-GPU counter-based generator with its full 32-bit output (no precision grid), read as
int32. The words are full entropy: no shorter encoding exists without the key.

The reduction is a sum modulo 2**32 (int32 with two's-complement wrap-around, what gloo, NCCL and
torch compute): associative and commutative, so every ring order, segment split or tree gives the
same bits, and the validator recomputes any chunk exactly from the keys. A row is a Merkle leaf
(``pog.merkle``: leaf bound to the challenge id, the participant's rank and the chunk index, its
int32 bytes hashed as they lie).

numpy and stdlib only: the validator's side imports this; it neither moves nor times anything.
"""

from __future__ import annotations

import numpy as np

from compute.pog.generator import MATRIX_A, fmix32_into, index_values, matrix_seeds, subkey, values_at

# uint32 temporaries per generation step (2 x 4 bytes an element): they stay in L2.
_BLOCK_ELEMENTS = 1 << 17


def participant_key(master: bytes, rank: int) -> bytes:
    """The 16-byte key of participant ``rank``'s shard: what the validator reveals to it alone."""
    return subkey(master, rank)


def shard_rows(
    key: bytes, first: int, count: int, chunk_len: int, out: np.ndarray | None = None
) -> np.ndarray:
    """Rows ``[first, first + count)`` of the shard keyed by ``key``: int32 ``[count, chunk_len]``."""
    row_seed, col_seed = matrix_seeds(key, MATRIX_A)
    row_vals = index_values(row_seed, first, count)
    col_vals = index_values(col_seed, 0, chunk_len)
    if out is None:
        out = np.empty((count, chunk_len), dtype=np.int32)
    words = out.view(np.uint32)
    step = max(1, _BLOCK_ELEMENTS // max(chunk_len, 1))
    tmp = np.empty((min(step, count), chunk_len), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for r0 in range(0, count, step):
            r1 = min(r0 + step, count)
            z = words[r0:r1]
            np.add(row_vals[r0:r1, None], col_vals[None, :], out=z)
            fmix32_into(z, tmp[: r1 - r0], final=True)
    return out


def shard_rows_at(key: bytes, indices: list[int], chunk_len: int) -> np.ndarray:
    """Rows ``indices`` (any order) of the shard keyed by ``key``: int32 ``[len(indices), chunk_len]``."""
    row_seed, col_seed = matrix_seeds(key, MATRIX_A)
    col_vals = index_values(col_seed, 0, chunk_len)
    with np.errstate(over="ignore"):
        z = values_at(row_seed, np.asarray(indices, dtype=np.uint64))[:, None] + col_vals[None, :]
        fmix32_into(z, np.empty_like(z), final=True)
    return z.view(np.int32)


def reduced_rows(master: bytes, world: int, indices: list[int], chunk_len: int) -> np.ndarray:
    """The all-reduced chunks at ``indices``: the int32 sum (mod 2**32) of every shard's rows there."""
    total = np.zeros((len(indices), chunk_len), dtype=np.int32)
    with np.errstate(over="ignore"):
        for rank in range(world):
            total += shard_rows_at(participant_key(master, rank), indices, chunk_len)
    return total


def as_leaf_rows(rows: np.ndarray) -> np.ndarray:
    """int32 rows as the float32 view ``pog.merkle`` hashes: the same bytes, no conversion."""
    return np.ascontiguousarray(rows, dtype="<i4").view("<f4")
