"""The accumulation emulator is bit-faithful: its roundings, orders and inputs match direct IEEE code."""

from __future__ import annotations

import numpy as np
import pytest

from compute.pog import choose_openings, new_challenge
from compute.pog.accumulation import Entries, fp32_order, half_accumulate, round_to, slab_fp16
from compute.pog.recompute import expected_entries
from compute.pog.tolerance import tolerance


@pytest.mark.parametrize(("fmt", "dtype"), [("fp16", np.float16), ("fp32", np.float32)])
def test_round_to_nearest_is_the_ieee_cast(fmt: str, dtype) -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(0, 10, 20000), rng.normal(0, 1e-6, 2000), [0.0, 1.0, -2.5]])
    assert np.array_equal(round_to(x, fmt), x.astype(dtype).astype(np.float64))


def test_round_toward_zero_never_grows_and_is_representable() -> None:
    x = np.random.default_rng(2).normal(0, 100, 20000)
    for fmt, dtype in (("fp16", np.float16), ("fp32", np.float32)):
        r = round_to(x, fmt, "rz")
        assert np.all(np.abs(r) <= np.abs(x)) and np.array_equal(r, r.astype(dtype).astype(np.float64))
        ulp = np.spacing(np.abs(r).astype(dtype)).astype(np.float64)
        assert np.all(np.abs(x - r) < ulp)  # truncated: less than one unit in the last place away


def _fp16_products(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a, b = (rng.integers(0, 2048, (2, n)) / 1024.0 - 1.0 for _ in range(2))
    return a * b


def test_fp32_fma_order_equals_a_float32_loop_slab_by_slab() -> None:
    products, chunk = _fp16_products(3000, 3), 1024
    want = []
    for row in products:
        acc = np.float32(0)
        for s0 in range(0, len(row), chunk):
            part = np.float32(0)
            for p in row[s0 : s0 + chunk]:
                part = np.float32(part + np.float32(p))  # p is exact in fp32
            acc = np.float32(acc + part)
        want.append(float(acc))
    assert np.array_equal(fp32_order(1).commit(iter([products]), chunk), np.array(want))


def test_fp16_accumulation_per_product_equals_a_float16_loop() -> None:
    products, chunk, block = _fp16_products(2048, 4), 1024, 64
    want = []
    for row in products:
        acc = np.float32(0)
        for s0 in range(0, len(row), chunk):
            part = np.float32(0)
            for b0 in range(s0, s0 + chunk, block):
                half = np.float16(0)
                for p in row[b0 : b0 + block]:
                    half = np.float16(float(half) + p)  # one rounding of the exact sum
                part = np.float32(part + np.float32(half))
            acc = np.float32(acc + part)
        want.append(float(acc))
    assert np.array_equal(half_accumulate(block, "rn", 1).commit(iter([products]), chunk), np.array(want))


def test_slab_fp16_rounds_each_slab_once() -> None:
    products = _fp16_products(4096, 5)
    slabs = products.reshape(2, 4, 1024).sum(axis=2).astype(np.float16).astype(np.float32)
    want = (slabs[:, 0] + slabs[:, 1] + slabs[:, 2] + slabs[:, 3]).astype(np.float64)  # fp32 adds in order
    assert np.array_equal(slab_fp16().commit(iter([products]), 1024), want)


@pytest.mark.parametrize("precision", ["fp16", "bf16", "fp32"])
def test_entries_regenerate_the_challenges_exact_products(precision: str) -> None:
    challenge = new_challenge(precision, 64, 5000, 64, 1, rng=np.random.default_rng(6))
    request = choose_openings(challenge, 4, 2, rng=np.random.default_rng(7))
    entries = Entries.of(challenge, request)
    want = expected_entries(challenge, 0, request.rows[0], request.cols[0])
    assert np.allclose(entries.exact(), want, rtol=0, atol=1e-9)


def test_the_real_torch_paths_on_cpu_pass_honestly_and_catch_fp16_blocks() -> None:
    pytest.importorskip("torch")
    from compute.lab.bench.pog_verdicts_cuda import cuda_report

    n = 1 << 15
    report = cuda_report("fp16", n, side=16, entries=16, device="cpu")
    assert report["tolerance"] == tolerance("fp16", n)
    assert report["honest"]["max_over_tol"] < 0.1
    for block in (16, 64, 256):
        assert report[f"fp16 blocks of {block}"]["rms"] > 2 * report["tolerance"]
