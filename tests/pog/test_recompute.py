"""The verifier's recomputation: numba kernel and numpy path give the exact entries, bit for bit.

The reference here is independent of both: the full matrices from ``generator.matrix_block_np``
turned back into centred integers and summed with Python integers (exact at any size), correctly
rounded to float64 once.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from compute.pog import choose_openings, new_challenge, recompute, verify, verify_kernel
from compute.pog.generator import MATRIX_A, MATRIX_B, PRECISION_BITS, matrix_block_np, subkey
from compute.pog.recompute import expected_entries, expected_for

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
BACKENDS = ["numpy", pytest.param("numba", marks=needs_numba)]


def exact_entries(challenge, gpu: int, rows: list[int], cols: list[list[int]]) -> np.ndarray:
    """Python-integer sums of the centred generator values, rounded once: the definition."""
    bits = PRECISION_BITS[challenge.precision]
    half = 2 ** (bits - 1)
    key = subkey(bytes.fromhex(challenge.key), gpu)
    a = matrix_block_np(key, MATRIX_A, bits, (0, challenge.m), (0, challenge.n)).astype(np.float64)
    b = matrix_block_np(key, MATRIX_B, bits, (0, challenge.n), (0, challenge.p)).astype(np.float64)
    a_int = (np.rint((a + 1.0) * half) - half).astype(np.int64)  # exact: the grid is k / half - 1
    b_int = (np.rint((b + 1.0) * half) - half).astype(np.int64)
    sums = [sum(int(x) for x in a_int[i] * b_int[:, j]) for i, c in zip(rows, cols, strict=True) for j in c]
    return np.array([float(s) for s in sums]) * (1.0 / half) ** 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("precision", ["fp16", "bf16", "fp32"])
def test_recomputation_is_exact(precision: str, backend: str) -> None:
    """n spans several kernel and numpy blocks with ragged tails; 8 rows x 3 own columns."""
    challenge = new_challenge(precision, 64, 2 * 8192 + 1077, 64, 1, rng=np.random.default_rng(12))
    request = choose_openings(challenge, 8, 3, rng=np.random.default_rng(13))
    rows, cols = request.rows[0], request.cols[0]
    got = expected_entries(challenge, 0, rows, cols, backend)
    assert np.array_equal(got, exact_entries(challenge, 0, rows, cols))


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_with_different_column_counts_are_exact(backend: str) -> None:
    challenge = new_challenge("fp32", 64, 4096 + 77, 64, 2, rng=np.random.default_rng(14))
    rows, cols = [3, 17, 40], [[5, 9, 63], [0], [9, 33]]
    for gpu in (0, 1):
        got = expected_entries(challenge, gpu, rows, cols, backend)
        assert np.array_equal(got, exact_entries(challenge, gpu, rows, cols))


def test_numpy_without_vecdot_is_exact(monkeypatch) -> None:
    """numpy < 2.0 has no vecdot: per-pair dots, same bits."""
    monkeypatch.delattr(np, "vecdot", raising=False)
    challenge = new_challenge("fp32", 64, 4096 + 77, 64, 1, rng=np.random.default_rng(14))
    rows, cols = [3, 17, 40], [[5, 9], [0, 2], [9, 33]]
    assert np.array_equal(
        recompute.entries_numpy(challenge, 0, rows, cols), exact_entries(challenge, 0, rows, cols)
    )


@pytest.mark.parametrize("cols_per_row", [1, 3])
def test_numpy_across_small_blocks_and_index_chunks(cols_per_row: int, monkeypatch) -> None:
    """Small blocks and index chunks (several of each, ragged tails of both) give the exact entries."""
    monkeypatch.setattr(recompute, "VERIFY_ELEMENTS", 16 * 1024)
    monkeypatch.setattr(recompute, "INDEX_CHUNK", 5000)  # not a multiple of the block: rounded down
    challenge = new_challenge("fp16", 64, 3 * 4096 + 1234, 64, 1, rng=np.random.default_rng(15))
    request = choose_openings(challenge, 8, cols_per_row, rng=np.random.default_rng(16))
    rows, cols = request.rows[0], request.cols[0]
    got = recompute.entries_numpy(challenge, 0, rows, cols)
    assert np.array_equal(got, exact_entries(challenge, 0, rows, cols))


@pytest.mark.parametrize("start", [0, 8191, (1 << 32) - 3, 1 << 40])
def test_numpy_index_values_match_the_generator(start: int) -> None:
    """The one-pass counter (``i * GOLDEN + (start * GOLDEN + seed)``) is ``index_values``."""
    from compute.pog.generator import GOLDEN, fmix32, index_values

    with np.errstate(over="ignore"):
        golden_steps = np.arange(1000, dtype=np.uint32) * np.uint32(GOLDEN)
    out, tmp = np.empty(1000, np.uint32), np.empty(1000, np.uint32)
    seed = 0xB56456DD
    got = recompute._index_into(seed, start, golden_steps, out, tmp)
    want = [fmix32((start + i) * GOLDEN + seed) for i in range(1000)]  # the scalar definition
    assert got.tolist() == want
    assert index_values(seed, start, 1000).tolist() == want


@needs_numba
@pytest.mark.parametrize("precision", ["fp16", "bf16", "fp32"])
def test_numba_and_numpy_agree_bit_for_bit_at_a_large_n(precision: str) -> None:
    """Past 2**21 the fp32 sums pass 2**53: both still give the one correctly rounded value."""
    challenge = new_challenge(precision, 8192, (1 << 21) + 3, 8192, 1, rng=np.random.default_rng(17))
    request = choose_openings(challenge, 4, 2, rng=np.random.default_rng(18))
    rows, cols = request.rows[0], request.cols[0]
    fast = expected_entries(challenge, 0, rows, cols, "numba")
    slow = expected_entries(challenge, 0, rows, cols, "numpy")
    assert fast.view(np.uint64).tolist() == slow.view(np.uint64).tolist()


def test_wide_sums_carry_past_int64_and_round_once() -> None:
    """fp32 block sums near 2**62 accumulate in two words; the result is the exact integer, rounded once."""
    sums = recompute._Sums(2, wide=True)
    big = (1 << 62) - 1
    for _ in range(1000):
        sums.add(np.array([big, -big], dtype=np.int64))
    assert sums.integers() == [1000 * big, -1000 * big]
    assert recompute.scaled([(1 << 60) + 1], 24)[0] == float(1 << 60) * 2.0**-46


def test_auto_uses_numpy_for_small_work_and_env_forces_numpy(monkeypatch) -> None:
    assert recompute.resolve_backend("auto", recompute.NUMBA_MIN_ELEMENTS - 1) == "numpy"
    assert recompute.resolve_backend("numpy", 1 << 40) == "numpy"
    with pytest.raises(ValueError, match="backend must be one of"):
        recompute.resolve_backend("gpu", 1)
    monkeypatch.setattr(verify_kernel, "_KERNELS", {})
    monkeypatch.setattr(verify_kernel, "_FAILED", [])
    monkeypatch.setenv(verify_kernel.VERIFIER_ENV, "numpy")
    assert not verify_kernel.kernel_available()
    assert recompute.resolve_backend("auto", 1 << 40) == "numpy"
    with pytest.raises(RuntimeError, match="needs numba"):
        recompute.resolve_backend("numba", 1)


@needs_numba
def test_auto_uses_numba_for_large_work() -> None:
    assert verify_kernel.warm_up()
    assert recompute.resolve_backend("auto", recompute.NUMBA_MIN_ELEMENTS) == "numba"


@pytest.mark.parametrize("backend", BACKENDS)
def test_precomputed_entries_give_the_same_verdict(backend: str) -> None:
    """``verify(..., expected=...)`` (the pool's path) judges exactly like the inline recomputation."""
    from compute.pog import Prover

    challenge = new_challenge("fp16", 64, 4096, 64, 2, rng=np.random.default_rng(19))
    prover = Prover("cpu")
    commitment = prover.commit(challenge)
    request = choose_openings(challenge, rng=np.random.default_rng(20))
    opening = prover.open(request)
    expected = expected_for(challenge, request, backend)
    assert verify(challenge, commitment, request, opening, expected=expected) == verify(
        challenge, commitment, request, opening
    )
    wrong = [e + 1.0 for e in expected]
    verdict = verify(challenge, commitment, request, opening, expected=wrong)
    assert not verdict.ok and "sampled entries off" in verdict.reasons[0]
    short = verify(challenge, commitment, request, opening, expected=expected[:1])
    assert not short.ok and "for 1 GPUs" in short.reasons[0]
