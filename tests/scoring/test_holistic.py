"""Holistic score: table-driven cases, the documented worked example, config loading."""

from __future__ import annotations

import pytest

from compute.scoring import ScoringError, gpu_credit, load_gpu_table
from compute.scoring.holistic import (
    HolisticConfig,
    HostEvidence,
    holistic_score,
    host_factor,
    load_holistic_config,
    value_shape,
)
from compute.scoring.value import ProvenGpu

TABLE = load_gpu_table()
NO_HOST = HostEvidence()
H100 = 3.3


@pytest.mark.parametrize(
    ("credits", "host", "rented", "sustained", "expected"),
    [
        ([], HostEvidence(64, 20, 512, 1000), True, 1.0, 0.0),  # no verified GPU: host alone scores 0
        ([H100], NO_HOST, False, 1.0, 3.3),
        ([H100], NO_HOST, True, 1.0, 3.3 * 1.1),
        ([H100], NO_HOST, False, 0.5, 3.3 * 0.5),
        ([H100], NO_HOST, False, 7.0, 3.3),  # a sustained factor never exceeds 1
        ([H100], HostEvidence(64, 20, 512, 1000), False, 1.0, 3.3 * 1.15),
        ([float("nan"), -5.0, H100], NO_HOST, False, 1.0, 3.3),
        ([H100] * 10, NO_HOST, False, 1.0, 3.3 * 8),  # cap 8
    ],
)
def test_holistic_score_table(credits, host, rented, sustained, expected) -> None:
    assert holistic_score(credits, host, rented, sustained).total == pytest.approx(expected)


def test_documented_worked_example() -> None:
    """README "Identification, score and weights" and docs/identification-and-scoring.md."""
    config = load_holistic_config()
    shape = value_shape(config)
    proven = ProvenGpu(490.03, 44.48, 80.0, 2900.0)  # 640/670 of the pre-PoG table, scaled
    slow_memory = ProvenGpu(490.03, 44.48, 80.0, 1500.0)
    unproven = ProvenGpu(459.4, 42.67, 0.0, 0.0)
    credits = [gpu_credit(g, TABLE, shape) for g in (proven, slow_memory, unproven)]
    assert [c.credited_as for c in credits] == ["H100 SXM", "H100 SXM", None]
    assert [c.value for c in credits] == pytest.approx([3.0636, 2.6499, 0.035], abs=1e-4)
    score = holistic_score([c.value for c in credits], HostEvidence(32, 12, 256, 2000), True, 0.95, config)
    assert score.gpu_part == pytest.approx(5.4611, abs=1e-4)
    assert score.host_factor == pytest.approx(1.098)
    assert score.total == pytest.approx(6.5959, abs=1e-3)


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
