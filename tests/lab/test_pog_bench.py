"""The benchmark CLI reports every figure, as JSON, for a tiny honest round."""

from __future__ import annotations

import json

import pytest

from compute.lab.bench.pog import main as pog_bench
from compute.lab.bench.pog_verdicts import main as pog_verdicts
from compute.lab.bench.pog_verify import main as pog_verify


@pytest.mark.slow
def test_bench_json_reports_all_figures(capsys) -> None:
    assert (
        pog_bench(
            [
                "--device",
                "cpu",
                "--precision",
                "fp16",
                "--m",
                "64",
                "--n",
                "256",
                "--p",
                "64",
                "--verify-n",
                "4096",
                "--verify-tflops",
                "0.1",
                "--threads",
                "2",
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert {
        "device",
        "precision",
        "m",
        "n",
        "p",
        "gemm_s",
        "commit_s",
        "overhead_ratio",
        "tflops",
        "verify_s",
        "verified_entries",
        "verify_s_per_entry",
        "verify_n_s",
        # validator cost at a real shape, CPU generator and hashing, GPU roofline
        "verify_h100_fp16_n",
        "verify_h100_fp16_s",
        "verify_h100_fp16_peak_mb",
        "verify_scaling_4x",
        "generator_ns_per_elem_cpu",
        "merkle_vs_sha256",
        "gpu_generator_bytes_per_elem",
        "gpu_generator_int_ops_per_elem",
        "roofline_commit_gemm_h100_fp16",
    } <= result.keys()
    assert result["device"] == "cpu" and result["verified_entries"] == 32
    assert result["overhead_ratio"] > 0 and result["verify_n_s"] > 0
    assert result["verify_h100_fp16_n"] == 4096  # sized from --verify-tflops 0.1
    assert 0 < result["verify_h100_fp16_peak_mb"] < 100
    assert result["gpu_generator_bytes_per_elem"] <= 8 and result["roofline_commit_gemm_h100_fp16"] > 1


def test_roofline_takes_the_slower_of_stores_and_integer_instructions() -> None:
    from compute.lab.bench.pog_gen import roofline

    m, n, p = 8192, 11468800, 8192
    shape = (513.0, 3350.0, m, n, p)
    stores_only = 1 + (2.0 * (m * n + n * p) / 3350e9) / (2.0 * m * n * p / 513e12)
    fast_alu = roofline(*shape, int_ops_s=1e18)["roofline_commit_gemm"]
    slow_alu = roofline(*shape, int_ops_s=1e12)["roofline_commit_gemm"]
    assert fast_alu == pytest.approx(stores_only, rel=1e-3)
    assert slow_alu > 1.5 * fast_alu  # 11 instructions per element at 1 T/s dominate the stores
    assert roofline(*shape)["gpu_generator_int_ops_per_elem"] == 11


def test_verify_suite_times_every_backend(capsys) -> None:
    """``bench pog-verify``: the verifier's cost per precision, for numba and numpy on the same opening."""
    import importlib.util

    assert pog_verify(["--verify-tflops", "0.1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    backends = ["numba", "numpy"] if importlib.util.find_spec("numba") else ["numpy"]
    for precision in ("fp16", "fp32"):
        assert result[f"verify_h100_{precision}_n"] == 4096
        assert result[f"verify_h100_{precision}_backend"] == backends[0]
        for backend in backends:
            assert result[f"verify_h100_{precision}_s_{backend}"] > 0
    assert result["verify_h100_fp16_s"] > 0 and result["verify_scaling_4x"] > 0


def test_bench_verdicts_json_reports_every_order_against_the_tolerance(capsys) -> None:
    """``bench pog-verdicts`` prints the honest and each shortcut's error with its ratio to the
    tolerance (at one given n here; production sizes by default)."""
    assert pog_verdicts(["--device", "cpu", "--n", "65536", "--entries", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"fp16", "fp32"}
    fp16 = result["fp16"]["given"]
    assert fp16["n"] == 65536 and fp16["model_margin"] > 2.5
    assert all(order["max_over_tol"] < 0.2 for order in fp16["honest"].values())
    assert {"numpy prover (cpu)", "fp32 FMA", "tensor core k=16 truncated"} <= set(fp16["honest"])
    closest = fp16["shortcuts"]["fp16 accumulate, promoted every 16, nearest per 16"]
    assert closest["rms_over_tol"] > 1.5 and closest["within_tol"].endswith("/32")
    assert result["fp32"]["given"]["shortcuts"]["tf32 inputs"]["round_pass_probability"] < 1e-3
