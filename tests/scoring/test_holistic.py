"""Holistic score: table-driven cases, the documented worked example, config loading."""

from __future__ import annotations

import pytest

from compute.scoring import ScoringError
from compute.scoring.holistic import (
    GpuEvidence,
    HolisticConfig,
    HostEvidence,
    holistic_score,
    host_factor,
    load_holistic_config,
)

H100 = dict(weight=3.3, expected_tflops=670.0, expected_gbs=3350.0)
NO_HOST = HostEvidence()


@pytest.mark.parametrize(
    ("gpus", "host", "rented", "sustained", "expected"),
    [
        ([], HostEvidence(64, 20, 512, 1000), True, 1.0, 0.0),  # no verified GPU: host alone scores 0
        ([GpuEvidence(tflops=670, memory_proven=True, gbs=3350, **H100)], NO_HOST, False, 1.0, 3.3),
        ([GpuEvidence(tflops=670, memory_proven=False, gbs=3350, **H100)], NO_HOST, False, 1.0, 3.3 * 0.7),
        (
            [GpuEvidence(tflops=10_000, memory_proven=True, gbs=1e6, **H100)],
            NO_HOST,
            False,
            1.0,
            3.3 * 1.1,
        ),  # capped
        ([GpuEvidence(tflops=670, memory_proven=True, gbs=3350, **H100)], NO_HOST, True, 1.0, 3.3 * 1.1),
        ([GpuEvidence(tflops=670, memory_proven=True, gbs=3350, **H100)], NO_HOST, False, 0.5, 3.3 * 0.5),
        (
            [GpuEvidence(tflops=670, memory_proven=True, gbs=3350, **H100)],
            HostEvidence(64, 20, 512, 1000),
            False,
            1.0,
            3.3 * 1.15,
        ),
        ([GpuEvidence(tflops=float("nan"), memory_proven=True, gbs=-5, **H100)], NO_HOST, False, 1.0, 0.0),
        (
            [GpuEvidence(tflops=670, memory_proven=True, gbs=3350, **H100)] * 10,
            NO_HOST,
            False,
            1.0,
            3.3 * 8,
        ),  # cap 8
    ],
)
def test_holistic_score_table(gpus, host, rented, sustained, expected) -> None:
    assert holistic_score(gpus, host, rented, sustained).total == pytest.approx(expected)


def test_documented_worked_example() -> None:
    measured = GpuEvidence(tflops=640, memory_proven=True, gbs=2900, **H100)
    unproven = GpuEvidence(tflops=600, memory_proven=False, **H100)
    score = holistic_score(
        [measured, measured, unproven], HostEvidence(32, 12, 256, 2000), True, 0.95, load_holistic_config()
    )
    assert score.per_gpu == pytest.approx((3.0636, 3.0636, 2.0687), abs=1e-4)
    assert score.gpu_part == pytest.approx(7.7860, abs=1e-4)
    assert score.host_factor == pytest.approx(1.098)
    assert score.total == pytest.approx(9.404, abs=1e-3)


def test_host_never_outweighs_a_gpu() -> None:
    best_host = host_factor(HostEvidence(1e6, 1e6, 1e6, 1e6), HolisticConfig())
    assert best_host == pytest.approx(1.15)


def test_config_file_matches_defaults_and_bad_files_fail(tmp_path, monkeypatch) -> None:
    assert load_holistic_config() == HolisticConfig()
    bad = tmp_path / "scoring.yaml"
    bad.write_text("gpu: {throughput_share: 2}\n")
    with pytest.raises(ScoringError, match="throughput_share"):
        load_holistic_config(bad)
    monkeypatch.setenv("COMPUTE_SCORING_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ScoringError, match="missing.yaml"):
        load_holistic_config()
