"""The collateral ramp: full credit at the required amount, linear down to the floor, never above 1."""

from __future__ import annotations

import pytest

from compute.collateral import collateral_factor


@pytest.mark.parametrize(
    "standing, required, floor, expected",
    [
        (0, 100, 0.5, 0.5),
        (50, 100, 0.5, 0.75),
        (100, 100, 0.5, 1.0),
        (400, 100, 0.5, 1.0),
        (-5, 100, 0.5, 0.5),
        (30, 100, 0.0, 0.3),
        (0, 0, 0.5, 1.0),
        (10, 100, 1.0, 1.0),
    ],
)
def test_collateral_factor(standing: int, required: int, floor: float, expected: float) -> None:
    assert collateral_factor(standing, required, floor) == pytest.approx(expected)


def test_a_bad_floor_is_refused() -> None:
    with pytest.raises(ValueError):
        collateral_factor(1, 1, 1.5)
