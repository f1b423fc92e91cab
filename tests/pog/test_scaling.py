"""Scaling efficiency, GPUs credited only for what ran concurrently (alone answers can only drop
GPUs), GPU-set changes reset history; one device answering for two claimed GPUs."""

from __future__ import annotations

import random

import pytest

from compute.pog.scaling import ScalingError, credited_gpus, history_after, scaling_efficiency, uuid_change
from compute.scoring import load_gpu_table
from compute.validator.params import MinerTarget, RoundParams
from compute.validator.proofs.depth import MemoryOutcome, ScalingOutcome
from compute.validator.proofs.evidence import Measured, scored_result
from compute.validator.session.pog_session import DeviceInfo

TABLE = load_gpu_table()


@pytest.mark.parametrize(
    ("together", "alone", "expected"),
    [
        ([100, 100], [100, 100], 1.0),
        ([90, 90, 90, 90], [100, 100, 100, 100], 0.9),
        ([50, 50], [100, 100], 0.5),
    ],
)
def test_scaling_efficiency(together, alone, expected) -> None:
    assert scaling_efficiency(together, alone) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("claimed", "verified", "together", "alone", "credited"),
    [
        (8, [True] * 8, [95] * 8, [100] * 8, 8),  # honest, 0.95 efficient
        (2, [True, True], [50, 50], [100, 100], 1),  # one GPU answering for two
        (8, [True] * 8, [50] * 8, [100] * 8, 4),  # four GPUs claiming eight
        (4, [True, True, False, True], [100] * 4, [100] * 4, 3),  # one sub-challenge failed
        (0, [], [], [], 0),
    ],
)
def test_machine_is_credited_for_what_it_delivered(claimed, verified, together, alone, credited) -> None:
    assert credited_gpus(claimed, verified, together, alone).credited == credited


def test_bad_figures_are_refused() -> None:
    with pytest.raises(ScalingError):
        scaling_efficiency([1.0], [1.0, 2.0])
    with pytest.raises(ScalingError):
        scaling_efficiency([float("nan")], [1.0])
    with pytest.raises(ScalingError):
        credited_gpus(2, [True], [1.0], [1.0])


def test_changed_gpu_set_resets_history() -> None:
    history = [1.0, 2.0]
    assert history_after(None, ["GPU-a"], history) == history
    assert history_after(["GPU-a", "GPU-b"], ["gpu-b", "GPU-a "], history) == history
    assert history_after(["GPU-a", "GPU-b"], ["GPU-a", "GPU-c"], history) == []
    change = uuid_change(["GPU-a", "GPU-b"], ["GPU-a", "GPU-c"])
    assert change.changed and change.added == {"gpu-c"} and change.removed == {"gpu-b"}


def test_withheld_alone_answers_never_raise_credit() -> None:
    """One device answers for two claimed GPUs (each concurrent share runs at half
    speed) and holds back its alone answers so they look as slow as the shares. The count can never
    exceed the concurrent proof; a withheld (None) or slower-than-share alone answer drops the GPU."""
    together = [50.0, 50.0]
    honest_alone = credited_gpus(2, [True, True], together, [100.0, 100.0])
    assert honest_alone.credited == 1  # answered alone at full speed: sharing revealed
    for alone in ([50.0, 50.0], [46.0, 46.0], [None, 50.0], [None, None], [10.0, 50.0], [0.0, 0.0]):
        credit = credited_gpus(2, [True, True], together, alone)
        assert credit.credited <= 2
        assert credit.credited <= sum(a is not None and a >= 0.9 * 50.0 for a in alone)
    assert credited_gpus(2, [True, True], together, [None, None]).credited == 0
    assert credited_gpus(2, [True, True], together, [10.0, 50.0]).counted == (False, True)


def test_random_alone_answers_never_credit_more_than_matching_the_concurrent_run() -> None:
    """Seeded random loop: whatever alone figures a miner returns, the count is at most what alone
    answers equal to the concurrent shares would give, and at most the verified sub-challenges."""
    rng = random.Random(11)
    for _ in range(2000):
        n = rng.randint(1, 8)
        verified = [rng.random() > 0.1 for _ in range(n)]
        together = [rng.uniform(1.0, 100.0) for _ in range(n)]
        alone = [None if rng.random() < 0.1 else rng.uniform(0.0, 200.0) for _ in range(n)]
        best = credited_gpus(n, verified, together, together).credited
        credit = credited_gpus(n, verified, together, alone)
        assert credit.credited <= best <= sum(verified)


def test_one_device_as_two_gpus_scores_no_more_than_one_gpu() -> None:
    """Through the evidence path: the concurrent shares are half of one H100 each, only one memory
    resident fits (memory challenges run simultaneously), and the alone answers are paced to match
    the shares. The machine scores less than the one honest H100 it is."""
    who, params = MinerTarget(1, "hk", "x:1"), RoundParams(round_id=1, block=0)
    devices = [DeviceInfo(i, "NVIDIA H100 80GB HBM3", 80 * 10**9) for i in range(2)]
    split = Measured({"fp16": 256.5, "fp32": 23.15}, {}, devices, 2)
    split.memory = MemoryOutcome((True, False), (1675.0, 0.0), 0.0, 80.0)
    paced = credited_gpus(2, [True, True], [335.0, 335.0], [335.0, 335.0])
    split.scaling = ScalingOutcome(1.0, paced)
    honest = Measured({"fp16": 513.0, "fp32": 46.3}, {}, devices[:1], 1)
    honest.memory = MemoryOutcome((True,), (3350.0,), 48.0, 80.0)
    cheated = scored_result(who, params, split, TABLE, None)
    fair = scored_result(who, params, honest, TABLE, None)
    assert paced.credited == 2  # the count alone cannot tell: the proven figures do
    assert fair.sample == pytest.approx(3.3)
    assert cheated.sample < fair.sample
