"""A small validator store written through the real ValidatorStore API, as the validator does."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashkit import NOW, Clock, h100

from compute.store import ScoreUpdate, ValidatorStore


@pytest.fixture
def filled_store(tmp_path: Path) -> Path:
    """Three miners over three rounds: uid 1 always passes, uid 2 passed then failed, uid 3 never
    tested; round 3 is still open with one result so far."""
    clock = Clock(NOW - 3 * 3600)
    store = ValidatorStore(tmp_path / "validator-27.db", clock=clock)
    store.sync_miners([(1, "hk-one"), (2, "hk-two"), (3, "hk-three")])
    for index in range(2):
        rnd = store.begin_round(block=100 * (index + 1))
        store.record_result(h100(rnd.round_id, 1, "hk-one", created=clock.now))
        if index == 0:
            store.record_result(h100(rnd.round_id, 2, "hk-two", created=clock.now))
        else:
            reasons = ("<script>alert(1)</script> mismatch",)
            store.record_result(
                h100(rnd.round_id, 2, "hk-two", ok=False, sample=0.0, reasons=reasons, tflops_fp16=9999.0)
            )
        store.finish_round(
            rnd.round_id, [ScoreUpdate(1, "hk-one", 0.5 + index), ScoreUpdate(2, "hk-two", 0.4)]
        )
        store.log_weights(100 * (index + 1), {1: 0.7, 2: 0.3}, 1, True)
        clock.now += 3600
    rnd = store.begin_round(block=300)
    store.record_result(h100(rnd.round_id, 1, "hk-one", rented=True, created=clock.now))
    store.close()
    return tmp_path / "validator-27.db"
