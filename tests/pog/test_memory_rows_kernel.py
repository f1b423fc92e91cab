"""The memory proof's compiled row regeneration: bit-identical to numpy's ``elements_np``."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from compute.pog.memory import rows_kernel
from compute.pog.memory.kernel import elements_np, round_keys

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")


@needs_numba
@pytest.mark.parametrize(("n", "rounds"), [(16, 1), (1000, 16), (3 * 1024 + 17, 96)])
def test_compiled_rows_equal_numpy(n: int, rounds: int) -> None:
    keys = round_keys(bytes(range(16)), 3, rounds)
    rows = np.array([0, 1, n - 1, (1 << 32) - 1 if n > 1000 else 7], dtype=np.uint64).astype(np.uint32)
    fast = rows_kernel.element_rows(rows, n, keys, "numba")
    assert fast.dtype == np.uint32 and fast.shape == (4, n)
    assert np.array_equal(fast, elements_np(rows, np.arange(n, dtype=np.uint32), keys))


def test_small_work_and_the_environment_stay_on_numpy(monkeypatch) -> None:
    keys = round_keys(bytes(16), 0, 4)
    rows = np.arange(3, dtype=np.uint32)
    want = elements_np(rows, np.arange(64, dtype=np.uint32), keys)
    assert np.array_equal(rows_kernel.element_rows(rows, 64, keys), want)  # under ROWS_KERNEL_MIN
    monkeypatch.setattr(rows_kernel, "_COMPILED", [])
    monkeypatch.setenv("COMPUTE_POG_VERIFIER", "numpy")
    assert np.array_equal(rows_kernel.element_rows(rows, 64, keys, "auto"), want)
    with pytest.raises(RuntimeError, match="need numba"):
        rows_kernel.element_rows(rows, 64, keys, "numba")
