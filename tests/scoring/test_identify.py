"""GPU identification from validator-measured throughput: table-driven scenarios."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from compute.scoring.identify import (
    DEFAULT_TABLE_PATH,
    TABLE_ENV_VAR,
    UNIDENTIFIED,
    GpuTable,
    GpuTableError,
    Identification,
    identify,
    load_gpu_table,
    normalise_name,
)

TABLE = load_gpu_table()
MODELS = sorted(TABLE.models)
REQUIRED = [
    "B200", "H200", "H100 SXM", "H100 PCIe", "A100 80GB", "A100 40GB", "L40S", "L40", "RTX 6000 Ada",
    "RTX A6000", "A40", "A10", "L4", "RTX 5090", "RTX 4090", "RTX 3090",
]  # fmt: skip


def test_table_lists_every_required_model() -> None:
    assert set(REQUIRED) <= set(TABLE.models)


def test_table_figures_are_realistic_dense_matmul_not_marketing() -> None:
    # PoG throughput an honest miner reaches: H100 SXM measured 513 / 46.3, others estimated
    assert 480 <= TABLE.models["H100 SXM"].tflops_fp16 <= 560
    assert 42 <= TABLE.models["H100 SXM"].tflops_fp32 <= 52
    assert 180 <= TABLE.models["A100 80GB"].tflops_fp16 <= 230
    assert 105 <= TABLE.models["RTX 4090"].tflops_fp16 <= 135
    assert TABLE.models["H200"].weight > TABLE.models["H100 SXM"].weight > TABLE.models["A100 80GB"].weight


def _named_or_lower(result: Identification, model: str) -> bool:
    """The model itself, or an ambiguous candidate of lower weight (ambiguity names the lower value)."""
    if result.model == model:
        return True
    names = {c.model for c in result.candidates}
    return model in names and result.model in names and result.weight <= TABLE.models[model].weight


@pytest.mark.parametrize("model", MODELS)
def test_each_model_identifies_as_itself_from_its_own_figures(model: str) -> None:
    spec = TABLE.models[model]
    result = identify(spec.tflops_fp16, spec.tflops_fp32, spec.memory_gb * 0.99, None, TABLE)
    assert _named_or_lower(result, model), result.reasons
    assert result.weight <= spec.weight
    assert 0.0 < result.confidence <= 1.0


@pytest.mark.parametrize("model", [m for m in MODELS if m not in {"L40S", "RTX A6000"}])
def test_unambiguous_models_are_named_exactly(model: str) -> None:
    spec = TABLE.models[model]
    assert identify(spec.tflops_fp16, spec.tflops_fp32, spec.memory_gb * 0.99, None, TABLE).model == model


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(("noise16", "noise32"), [(0.9, 0.9), (1.1, 1.1), (0.9, 1.1), (1.1, 0.9)])
def test_ten_percent_noise_still_identifies_the_model(model: str, noise16: float, noise32: float) -> None:
    spec = TABLE.models[model]
    result = identify(
        spec.tflops_fp16 * noise16, spec.tflops_fp32 * noise32, spec.memory_gb * 0.97, spec.aliases[0], TABLE
    )
    assert _named_or_lower(result, model), result.reasons


@pytest.mark.parametrize("memory", [39.4, 40.0, 79.2, 80.0])
def test_a100_40_and_80_are_separated_by_memory(memory: float) -> None:
    expected = "A100 40GB" if memory < 60 else "A100 80GB"
    wrong_name = "NVIDIA A100-SXM4-80GB" if memory < 60 else "NVIDIA A100-SXM4-40GB"
    result = identify(201.0, 16.5, memory, wrong_name, TABLE)
    assert result.model == expected, result.reasons
    assert any("memory picks" in r or "not covered by the proven" in r for r in result.reasons)


def test_a100_80_is_never_named_without_80_gb_proven() -> None:
    for memory in (None, 40.0, 60.0):
        assert identify(201.0, 16.5, memory, "NVIDIA A100-SXM4-80GB", TABLE).model == "A100 40GB"


def test_rtx_4090_figures_claiming_h100_name_identify_as_4090() -> None:
    result = identify(121.0, 51.8, 23.99, "NVIDIA H100 80GB HBM3", TABLE)
    assert result.model == "RTX 4090"
    assert any("disagrees" in r for r in result.reasons)


def test_rtx_4090_figures_claiming_h100_name_without_memory_still_not_h100() -> None:
    result = identify(121.0, 51.8, None, "NVIDIA H100 80GB HBM3", TABLE)
    assert result.model in {"RTX 4090", "L40"}
    assert result.model != "H100 SXM"


def test_ambiguity_names_the_lower_weight_whatever_the_reported_name() -> None:
    spec = TABLE.models["L40S"]
    assert TABLE.models["RTX 6000 Ada"].weight < spec.weight
    for name in ("NVIDIA L40S", "NVIDIA RTX 6000 Ada Generation", None):
        result = identify(spec.tflops_fp16 * 0.96, spec.tflops_fp32 * 0.97, 47.5, name, TABLE)
        assert result.model == "RTX 6000 Ada", result.reasons
        assert result.confidence < 1.0


def test_ties_are_not_broken_by_name_toward_the_higher_weight() -> None:
    """The old rule sorted ties by name: with equal fits it named the better-paid model."""
    memory = {"memory_gb": 48, "bandwidth_gbs": 700}
    raw = {
        "version": 1,
        "models": {
            "A-rich": {
                "display_name": "A",
                "weight": 2.0,
                "tflops_fp16": 100.0,
                "tflops_fp32": 20.0,
                **memory,
            },
            "Z-poor": {
                "display_name": "Z",
                "weight": 1.0,
                "tflops_fp16": 101.0,
                "tflops_fp32": 19.8,
                **memory,
            },
        },
    }
    table = GpuTable.model_validate(raw)
    for name in (None, "A", "Z"):
        assert identify(100.5, 19.9, 48.0, name, table).model == "Z-poor"


def test_table_whose_weights_are_not_monotone_in_capability_is_rejected() -> None:
    figures = {"tflops_fp16": 100.0, "tflops_fp32": 20.0, "memory_gb": 48, "bandwidth_gbs": 700}
    raw = {
        "version": 1,
        "models": {
            "Fast": {"display_name": "F", "weight": 1.0, **figures, "tflops_fp16": 150.0},
            "Slow": {"display_name": "S", "weight": 2.0, **figures},
        },
    }
    with pytest.raises(ValueError, match="'Fast'.*below that of 'Slow'"):
        GpuTable.model_validate(raw)


def test_memory_hint_cannot_promote_a_clearly_slower_gpu() -> None:
    # H100 PCIe figures with an H200-sized memory claim: H200 is out of throughput tolerance.
    result = identify(360.0, 33.6, 141.0, "NVIDIA H200", TABLE)
    assert result.model == "H100 PCIe"


@pytest.mark.parametrize(
    ("fp16", "fp32", "reason_part"),
    [
        (None, None, "no throughput measured"),
        (0.0, 50.0, "fp16 TFLOPS must be positive"),
        (-650.0, 50.0, "fp16 TFLOPS must be positive"),
        (650.0, -1.0, "fp32 TFLOPS must be positive"),
        (math.nan, 50.0, "fp16 TFLOPS is not finite"),
        (650.0, math.inf, "fp32 TFLOPS is not finite"),
        ("650", 50.0, "must be a number"),
        (True, 50.0, "must be a number"),
        (30000.0, 50.0, "faster than every known model"),
        (9000.0, 900.0, "suspicious"),
        (8.0, 9.0, "slower than every model"),
        (670.0, 18.5, "no model within"),
    ],
)
def test_garbage_or_impossible_measurements_are_unidentified(fp16, fp32, reason_part: str) -> None:
    result = identify(fp16, fp32, 80.0, "NVIDIA H100 80GB HBM3", TABLE)
    assert result.model is None and result.label == UNIDENTIFIED
    assert result.confidence == 0.0 and result.weight == 0.0
    assert any(reason_part in r for r in result.reasons), result.reasons


@pytest.mark.parametrize("memory", [math.nan, -5.0, 0.0, "80"])
def test_garbage_memory_hint_is_ignored_with_a_reason(memory) -> None:
    spec = TABLE.models["H100 SXM"]
    result = identify(spec.tflops_fp16, spec.tflops_fp32, memory, None, TABLE)
    assert result.model == "H100 SXM"
    assert any("memory hint" in r and "ignored" in r for r in result.reasons)


def test_single_precision_measurement_is_enough() -> None:
    assert identify(None, 18.4, 80.0, None, TABLE).model == "A100 80GB"
    assert identify(551.0, None, 140.4, None, TABLE).model == "H200"


def test_cpu_throughput_is_identified_as_cpu_with_tiny_weight() -> None:
    result = identify(0.02, 0.15, 7.7, "cpu", TABLE)
    assert result.model == "CPU"
    assert result.weight == pytest.approx(0.0015)
    assert result.weight < TABLE.models["L4"].weight / 100
    assert TABLE.weight_of("CPU", 0.15) == pytest.approx(0.0015)


@pytest.mark.parametrize(
    ("model", "tflops", "expected"),
    [
        ("H100 SXM", None, 3.3),
        (None, None, 0.0),
        (UNIDENTIFIED, None, 0.0),
        ("GTX 480", None, 0.0),
        ("CPU", None, 0.0001),
    ],
)
def test_weight_of_models(model, tflops, expected: float) -> None:
    assert TABLE.weight_of(model, tflops) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("nvidia  geforce rtx 4090", "RTX 4090"),
        ("RTX 4090", "RTX 4090"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
        ("Tesla K80", None),
        ("", None),
        (None, None),
        (42, None),
    ],
)
def test_reported_names_resolve_to_canonical_models(reported, expected) -> None:
    assert TABLE.resolve_name(reported) == expected


def test_normalise_name_strips_vendor_prefixes() -> None:
    assert normalise_name("  NVIDIA GeForce   RTX_4090 ") == "rtx 4090"


def test_identification_is_frozen() -> None:
    result = identify(513.0, 46.3, 80.0, None, TABLE)
    assert isinstance(result, Identification)
    with pytest.raises(AttributeError):
        result.model = "B200"  # type: ignore[misc]


# --- table loading ---------------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "table.yaml"
    path.write_text(text)
    return path


MINIMAL = """
version: 1
models:
  X1:
    display_name: Test GPU
    aliases: [ACME X1]
    tflops_fp16: 100
    tflops_fp32: 20
    memory_gb: 16
    bandwidth_gbs: 500
    weight: 1.0
"""


def test_default_table_is_found_relative_to_the_package() -> None:
    assert DEFAULT_TABLE_PATH.is_file()
    assert isinstance(TABLE, GpuTable)


def test_env_var_overrides_the_table_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TABLE_ENV_VAR, str(_write(tmp_path, MINIMAL)))
    table = load_gpu_table()
    assert list(table.models) == ["X1"]
    assert identify(100.0, 20.0, table=table).model == "X1"


def test_identify_without_table_uses_the_default_table() -> None:
    assert identify(513.0, 46.3, 79.6).model == "H100 SXM"


def test_identify_without_table_reports_a_broken_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TABLE_ENV_VAR, str(_write(tmp_path, "version: 1\nmodels: {}\n")))
    with pytest.raises(GpuTableError, match="models"):
        identify(670.0, 51.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 1\nmodels: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "must be a mapping"),
        (MINIMAL.replace("tflops_fp16: 100", "tflops_fp16: -3"), "models.X1.tflops_fp16"),
        (MINIMAL.replace("weight: 1.0", "weight: lots"), "models.X1.weight"),
        (MINIMAL.replace("    memory_gb: 16\n", ""), "models.X1.memory_gb"),
        (MINIMAL + "    colour: red\n", "colour"),
        ("version: 1\nmodels: {}\n", "models"),
        (MINIMAL + "  X2:\n" + MINIMAL.split("X1:\n")[1].replace("Test GPU", "Other"), "already used"),
        (MINIMAL + "cpu_fallback:\n  model: ACME X1\n", "collides"),
    ],
)
def test_malformed_table_gives_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(GpuTableError) as info:
        load_gpu_table(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_missing_table_file_gives_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GpuTableError, match="cannot read GPU table"):
        load_gpu_table(tmp_path / "absent.yaml")
