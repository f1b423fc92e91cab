"""The interconnect benchmark reports every figure, as JSON, for a tiny run of two gloo processes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from compute.lab.bench.interconnect import main as interconnect_bench  # noqa: E402


@pytest.mark.slow
def test_interconnect_bench_json_reports_proof_plain_and_verify(capsys) -> None:
    argv = ["--world", "2", "--mib", "0.25", "--repeats", "1", "--chunk-len", "256", "--json"]
    assert interconnect_bench(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["all_passed"] is True and figures["device"] == "cpu"
    assert figures["link_mib"] == pytest.approx(0.25)
    for key in ("proof_link_gbs", "plain_link_gbs", "proof_vs_plain", "verify_cpu_ms_per_link"):
        assert figures[key] > 0, key
    assert figures["proof_vs_plain_target"] == 0.9 and figures["verify_cpu_ms_target"] == 10.0
    assert figures["phase_total_s"] >= figures["phase_hash_s"]
