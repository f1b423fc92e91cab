"""Generator: published test vectors, numpy/torch bit identity, exact grids, no structure."""

from __future__ import annotations

import numpy as np
import pytest

from compute.pog.generator import (
    GOLDEN,
    MATRIX_A,
    MATRIX_B,
    PRECISION_BITS,
    WORD,
    fmix32,
    index_values,
    matrix_block_np,
    matrix_seeds,
    mix_block_np,
    mix_block_torch,
    mix_vector_f64,
    subkey,
)

KEY = bytes(range(16))

# Published test vectors: integers k with value = k / 2**(bits-1) - 1.
# A of GPU 0, rows 0..1, columns 0..3; B of GPU 3, row 5, columns 1000..1002.
VECTORS = {
    "fp16": ([[737, 498, 1709, 326], [1115, 1456, 1101, 1530]], [[1341, 125, 899]]),
    "bf16": ([[92, 62, 213, 40], [139, 182, 137, 191]], [[167, 15, 112]]),
    "fp32": (
        [[6038901, 4084729, 14002391, 2671702], [9134737, 11935130, 9019610, 12536456]],
        [[10988314, 1028077, 7364763]],
    ),
}


def _as_k(values: np.ndarray, bits: int) -> list[list[int]]:
    return [[int((x + 1) * 2 ** (bits - 1)) for x in row] for row in values.tolist()]


def test_key_derivation_vectors() -> None:
    gpu_key = subkey(KEY, 0)
    assert gpu_key.hex() == "87fa562b306cefae38576691cbb74971"
    assert matrix_seeds(gpu_key, MATRIX_A) == (0xA1985326, 0x301DF7A1)
    assert matrix_seeds(gpu_key, MATRIX_B) == (0x48DBC291, 0x7B7A9A7D)


def test_fmix32_is_murmur3s_finaliser() -> None:
    # MurmurHash3_x86_32 of the empty string is fmix32(seed): published vectors for seeds 1 and 2**32-1
    assert fmix32(1) == 0x514E28B7
    assert fmix32(0xFFFFFFFF) == 0x81F16F39
    assert fmix32(0) == 0


def test_index_values_follow_the_scalar_definition() -> None:
    seed, start = 0xDEADBEEF, (1 << 32) - 5  # the counter wraps at 2**32
    want = [fmix32((start + i) * GOLDEN + seed) for i in range(10)]
    assert index_values(seed, start, 10).tolist() == want
    assert len(set(index_values(seed, 0, 1 << 16).tolist())) == 1 << 16  # a bijection: no shared values


@pytest.mark.parametrize("precision", sorted(PRECISION_BITS))
def test_elements_follow_the_scalar_definition(precision: str) -> None:
    """numpy's passes (which skip fmix32's last step for <= 16 bits) equal the one-line definition."""
    bits = PRECISION_BITS[precision]
    rows, cols = index_values(11, 0, 9), index_values(12, 3, 13)
    rows[0], cols[0] = 2**32 - 1, 2**31 + 7  # their sum wraps at 2**32
    want = [[fmix32(int(r) + int(c)) >> (WORD - bits) for c in cols] for r in rows]
    got = (mix_block_np(rows, cols, bits).astype(np.float64) + 1) * 2 ** (bits - 1)
    assert got.tolist() == want


@pytest.mark.parametrize("precision", sorted(VECTORS))
def test_published_vectors(precision: str) -> None:
    bits = PRECISION_BITS[precision]
    block_a = matrix_block_np(subkey(KEY, 0), MATRIX_A, bits, (0, 2), (0, 4))
    block_b = matrix_block_np(subkey(KEY, 3), MATRIX_B, bits, (5, 6), (1000, 1003))
    assert (_as_k(block_a, bits), _as_k(block_b, bits)) == VECTORS[precision]


@pytest.mark.parametrize("precision", sorted(PRECISION_BITS))
def test_torch_cpu_is_bit_identical_to_numpy(precision: str) -> None:
    torch = pytest.importorskip("torch")
    bits = PRECISION_BITS[precision]
    rows = index_values(12345, 7, 97)
    cols = index_values(2**32 - 99, 1 << 40, 301)
    cols[:2] = [2**32 - 1, 2**31]  # row + column wraps at 2**32
    expected = mix_block_np(rows, cols, bits)
    got = mix_block_torch(
        torch.from_numpy(rows.astype(np.int64)), torch.from_numpy(cols.astype(np.int64)), bits
    )
    assert np.array_equal(got.numpy(), expected)


@pytest.mark.parametrize("precision", sorted(PRECISION_BITS))
def test_values_lie_on_an_exact_grid_of_the_precision(precision: str) -> None:
    torch = pytest.importorskip("torch")
    bits = PRECISION_BITS[precision]
    block = matrix_block_np(subkey(KEY, 1), MATRIX_A, bits, (0, 64), (0, 512))
    assert block.min() >= -1.0 and block.max() < 1.0
    k = (block.astype(np.float64) + 1) * 2 ** (bits - 1)
    assert np.array_equal(k, np.round(k))
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[precision]
    roundtrip = torch.from_numpy(block).to(dtype).to(torch.float32).numpy()
    assert np.array_equal(roundtrip, block)


def test_vectors_reproduce_rows_and_columns_of_blocks() -> None:
    gpu_key = subkey(KEY, 2)
    (a_rs, a_cs), (b_rs, b_cs) = matrix_seeds(gpu_key, MATRIX_A), matrix_seeds(gpu_key, MATRIX_B)
    a = matrix_block_np(gpu_key, MATRIX_A, 11, (0, 8), (0, 300))
    b = matrix_block_np(gpu_key, MATRIX_B, 11, (0, 300), (0, 8))
    row3 = mix_vector_f64(int(index_values(a_rs, 3, 1)[0]), index_values(a_cs, 0, 300), 11)
    col5 = mix_vector_f64(int(index_values(b_cs, 5, 1)[0]), index_values(b_rs, 0, 300), 11)
    assert np.array_equal(row3, a[3].astype(np.float64))
    assert np.array_equal(col5, b[:, 5].astype(np.float64))


def test_different_gpus_and_matrices_get_unrelated_values() -> None:
    blocks = [matrix_block_np(subkey(KEY, g), mat, 24, (0, 32), (0, 32)) for g in (0, 1) for mat in (0, 1)]
    for i in range(len(blocks)):
        for j in range(i + 1, len(blocks)):
            corr = np.corrcoef(blocks[i].ravel(), blocks[j].ravel())[0, 1]
            assert abs(corr) < 0.15


def test_matrix_has_no_shift_structure() -> None:
    a = matrix_block_np(subkey(KEY, 0), MATRIX_A, 11, (0, 65), (0, 65)).astype(np.float64)
    shifts = {
        "rows": a[1:, :64] - a[:-1, :64],
        "columns": a[:64, 1:] - a[:64, :-1],
        "diagonal": a[1:, 1:] - a[:-1, :-1],
        "anti-diagonal": a[1:, :-1] - a[:-1, 1:],
    }
    for name, diff in shifts.items():
        assert np.linalg.matrix_rank(diff) == 64, name
    assert np.linalg.matrix_rank(a[:64, :64]) == 64


def test_rows_are_not_short_linear_recurrences() -> None:
    row = matrix_block_np(subkey(KEY, 0), MATRIX_A, 24, (7, 8), (0, 400)).astype(np.float64)[0]
    order = 32
    # a recurrence of order < 32 would make this Hankel matrix rank-deficient
    hankel = np.stack([row[k : k + order + 1] for k in range(len(row) - order)])
    assert np.linalg.matrix_rank(hankel) == order + 1


def test_entries_look_uniform() -> None:
    block = matrix_block_np(subkey(KEY, 5), MATRIX_B, 11, (0, 256), (0, 256))
    counts, _ = np.histogram(block, bins=16, range=(-1, 1))
    expected = block.size / 16
    chi2 = float((((counts - expected) ** 2) / expected).sum())
    assert chi2 < 40  # 15 degrees of freedom: p ~ 5e-4
    assert abs(float(block.mean())) < 0.01
