"""Scaling efficiency, GPUs credited for what they delivered, GPU-set changes reset history."""

from __future__ import annotations

import pytest

from compute.pog.scaling import ScalingError, credited_gpus, history_after, scaling_efficiency, uuid_change


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
