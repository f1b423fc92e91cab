"""Fixtures for allocation tests (helpers live in ``allockit``)."""

from __future__ import annotations

import pytest
from allockit import RenterKey, new_renter_key


@pytest.fixture
def renter_key() -> RenterKey:
    return new_renter_key()
