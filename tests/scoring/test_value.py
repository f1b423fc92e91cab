"""Value function: credit is a monotone function of proven figures, capped by the table.

Property tests (hypothesis, derandomised so CI is reproducible) and the table-window cheat
played against the real table and the validator's evidence path.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compute.scoring import HolisticConfig, gpu_credit, identify, load_gpu_table, value_shape
from compute.scoring.value import ProvenGpu, model_value, table_figures
from compute.validator.params import MinerTarget, RoundParams
from compute.validator.proofs.depth import MemoryOutcome
from compute.validator.proofs.evidence import Measured, proven_gpus, scored_result
from compute.validator.session.pog_session import DeviceInfo

TABLE = load_gpu_table()
SHAPE = value_shape(HolisticConfig())
PARAMS = RoundParams(round_id=1, block=0)
FIELDS = ("tflops_fp16", "tflops_fp32", "memory_gb", "gbs")
PROPERTY = settings(max_examples=400, derandomize=True, deadline=None)

tflops16 = st.floats(0.0, 3000.0, allow_nan=False)
tflops32 = st.floats(0.0, 150.0, allow_nan=False)
memory = st.floats(0.0, 300.0, allow_nan=False)
bandwidth = st.floats(0.0, 12000.0, allow_nan=False)
points = st.builds(ProvenGpu, tflops16, tflops32, memory, bandwidth)


def credit(gpu: ProvenGpu) -> float:
    return gpu_credit(gpu, TABLE, SHAPE).value


def _raised(gpu: ProvenGpu, field: str, by: float) -> ProvenGpu:
    values = {name: getattr(gpu, name) for name in FIELDS}
    values[field] += by
    return ProvenGpu(**values)


@PROPERTY
@given(points, st.sampled_from(FIELDS), st.floats(0.0, 5000.0, allow_nan=False))
def test_property_raising_any_proven_quantity_never_lowers_credit(gpu, field, by) -> None:
    assert credit(_raised(gpu, field, by)) >= credit(gpu) - 1e-12


@PROPERTY
@given(points, st.sampled_from(sorted(TABLE.models)))
def test_property_proving_no_more_than_a_model_never_pays_more_than_that_model(gpu, name) -> None:
    """The tolerance-window cheat in general: any point at or below a model's figures (a GPU of
    that model pacing itself into another model's window) earns at most that model's weight."""
    figures = table_figures(TABLE.models[name])
    capped = ProvenGpu(*(min(getattr(gpu, f), getattr(figures, f)) for f in FIELDS))
    assert credit(capped) <= TABLE.models[name].weight + 1e-9


@PROPERTY
@given(points)
def test_property_credit_is_bounded_by_the_best_model_the_proven_memory_covers(gpu) -> None:
    covered = [
        m for m in TABLE.models.values() if gpu.memory_gb >= m.memory_gb * (1 - TABLE.memory_tolerance)
    ]
    bound = max([m.weight * SHAPE.ratio_cap for m in covered], default=0.0)
    cpu = TABLE.cpu_fallback
    floor = max(cpu.min_weight, cpu.weight_per_tflops * cpu.max_tflops_fp32) * (1 + SHAPE.ratio_cap)
    assert credit(gpu) <= max(bound, floor) + 1e-9


@settings(max_examples=60, derandomize=True, deadline=None)
@given(points, st.sampled_from([None, "NVIDIA H100 80GB HBM3", "NVIDIA B200", "NVIDIA L4", "cpu"]))
def test_property_credit_never_exceeds_the_credit_of_the_proven_quantities(gpu, name) -> None:
    """Through the validator's evidence path: the device name (miner-reported) and the model the
    miner claims for its memory proof change nothing; a claim above the real memory fails the proof."""
    for claimed in sorted({m.memory_gb for m in TABLE.models.values()}):
        proven = claimed <= gpu.memory_gb  # the real device holds a resident sized for the claim or not
        measured = Measured(
            {"fp16": gpu.tflops_fp16 or None, "fp32": gpu.tflops_fp32 or None},
            {},
            [DeviceInfo(0, name or "", 0)],
            1,
        )
        measured.memory = MemoryOutcome((proven,), (gpu.gbs,), 0.6 * claimed if proven else 0.0, claimed)
        result = scored_result(MinerTarget(1, "hk", "x:1"), PARAMS, measured, TABLE, None)
        assert result.sample <= credit(gpu) + 1e-9


def test_reported_name_never_adds_credit() -> None:
    rtx4090 = table_figures(TABLE.models["RTX 4090"])
    samples = []
    for name in ("NVIDIA GeForce RTX 4090", "NVIDIA H100 80GB HBM3", "NVIDIA B200", ""):
        measured = Measured({"fp16": 118.7, "fp32": 52.7}, {}, [DeviceInfo(0, name, 0)], 1)
        measured.memory = MemoryOutcome((True,), (rtx4090.gbs,), 14.4, 24.0)
        samples.append(scored_result(MinerTarget(1, "hk", "x:1"), PARAMS, measured, TABLE, None).sample)
    assert samples == pytest.approx([TABLE.models["RTX 4090"].weight] * 4)


def test_tolerance_window_cheat_gets_only_proven_figures() -> None:
    """An RTX 4090 paced its GEMM rounds into the H20's window (fp16 x0.62, fp32
    x0.51) and claimed an H20; with no memory proven the old identify named H20 (weight 1.1 against
    the 4090's 0.7, +57%..+69% with noise). Now: H20's 96 GB cannot be proven on 24 GB, the name is
    the lower-weight candidate, and the credit is what the paced figures prove: the CPU floor."""
    paced = {"fp16": 118.7 * 0.62, "fp32": 52.7 * 0.51}
    cheat = Measured(paced, {}, [DeviceInfo(0, "NVIDIA H20", 24 * 10**9)], 1)
    cheat.memory = MemoryOutcome((False,), (0.0,), 0.0, 96.0)  # a 57.6 GB resident does not fit in 24 GB
    honest = Measured({"fp16": 118.7, "fp32": 52.7}, {}, [DeviceInfo(0, "NVIDIA GeForce RTX 4090", 0)], 1)
    honest.memory = MemoryOutcome((True,), (1008.0,), 14.4, 24.0)
    who, params = MinerTarget(1, "hk", "x:1"), PARAMS
    cheated = scored_result(who, params, cheat, TABLE, None)
    fair = scored_result(who, params, honest, TABLE, None)
    assert cheated.models != ("H20",)
    assert fair.sample == pytest.approx(0.75)
    assert cheated.sample == pytest.approx(credit(proven_gpus(cheat)[0])) and cheated.sample < 0.05
    # even had it proven 24 GB honestly, pacing only lowers what it earns
    cheat.memory = honest.memory
    assert scored_result(who, params, cheat, TABLE, None).sample < fair.sample


@pytest.mark.parametrize(("low", "high"), [("A100 40GB", "A100 80GB"), ("H100 SXM", "H200"), ("L40S", "H20")])
def test_model_needs_proven_memory(low: str, high: str) -> None:
    """The bigger model's throughput without its memory proven is paid as the smaller one at most."""
    figures = table_figures(TABLE.models[high])
    small_memory = ProvenGpu(
        figures.tflops_fp16, figures.tflops_fp32, TABLE.models[low].memory_gb, figures.gbs
    )
    assert credit(small_memory) < TABLE.models[high].weight
    assert model_value(small_memory, TABLE.models[high], TABLE, SHAPE) == 0.0
    assert credit(ProvenGpu(figures.tflops_fp16, figures.tflops_fp32, 0.0, 0.0)) < 0.05  # nothing proven


@pytest.mark.parametrize("name", sorted(TABLE.models))
def test_table_is_consistent_with_the_value_function(name: str) -> None:
    """Each entry's figures earn exactly its weight: no other entry pays a model more (the old
    table paid H20 more than an RTX 4090, and an RTX 6000 Ada more by the L40S's price)."""
    model = TABLE.models[name]
    assert credit(table_figures(model)) == pytest.approx(model.weight)


def test_h20_does_not_outweigh_the_faster_rtx_4090() -> None:
    h20, rtx = TABLE.models["H20"], TABLE.models["RTX 4090"]
    assert h20.tflops_fp16 < rtx.tflops_fp16 and h20.weight <= rtx.weight


@pytest.mark.parametrize(("name", "parts"), itertools.product(sorted(TABLE.models), (2, 3, 4, 8)))
def test_splitting_one_device_into_claimed_gpus_never_pays(name: str, parts: int) -> None:
    """One device answering for k claimed GPUs proves 1/k of its throughput and bandwidth on each,
    and can hold k residents only of models with k x 0.6 x memory <= its memory."""
    device = TABLE.models[name]
    best = 0.0
    for other in TABLE.models.values():
        if parts * 0.6 * other.memory_gb <= device.memory_gb:
            share = ProvenGpu(
                device.tflops_fp16 / parts,
                device.tflops_fp32 / parts,
                other.memory_gb,
                device.bandwidth_gbs / parts,
            )
            best = max(best, parts * credit(share))
    assert best <= device.weight + 1e-9


@pytest.mark.parametrize(
    "gpu",
    [
        ProvenGpu(math.nan, math.nan, 80.0, 3000.0),
        ProvenGpu(math.inf, math.inf, math.inf, math.inf),
        ProvenGpu(-670.0, -51.0, -80.0, -3350.0),
        ProvenGpu(True, True, True, True),  # type: ignore[arg-type]
    ],
)
def test_garbage_figures_prove_nothing(gpu: ProvenGpu) -> None:
    assert credit(gpu) == 0.0


def test_cpu_devices_earn_a_small_floor() -> None:
    ci = credit(ProvenGpu(0.02, 0.15, 0.0012, 0.1))
    assert 0 < ci < TABLE.models["L4"].weight / 50
    assert gpu_credit(ProvenGpu(0.02, 0.15), TABLE, SHAPE).credited_as is None


def test_identification_names_but_never_pays() -> None:
    """identify() and the credit are separate: the same proven point earns the same whatever is named."""
    spec = TABLE.models["L40S"]
    named = identify(spec.tflops_fp16, spec.tflops_fp32, spec.memory_gb, "NVIDIA L40S", TABLE)
    assert named.model == "RTX 6000 Ada"  # ambiguous: the lower weight is named
    assert credit(table_figures(spec)) == pytest.approx(spec.weight)  # the proven figures still earn 1.0
