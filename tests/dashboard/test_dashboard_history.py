"""The dashboard's snapshot query over a real store: verdicts, proven figures, history, progress."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from dashkit import NOW

from compute.store import StoreError, ValidatorStore
from compute.store.history import overview


def test_overview_shows_latest_verdict_and_only_validator_proven_figures(filled_store: Path) -> None:
    snap = overview(filled_store, now=NOW)
    by_uid = {m.uid: m for m in snap.miners}
    assert sorted(by_uid) == [1, 2, 3]
    # uid 2's newest round failed while claiming 9999 TFLOPS: the verdict is the failure, the proven
    # figures stay those of its last *passing* round.
    assert by_uid[2].latest is not None and not by_uid[2].latest.ok
    assert by_uid[2].verified is not None and by_uid[2].verified.tflops_fp16 == 702.0
    assert by_uid[2].verified.round_id == 1
    # uid 1 was rented in the open round: its verdict shows rented, proof comes from round 2.
    assert by_uid[1].latest is not None and by_uid[1].latest.rented
    assert by_uid[1].verified is not None and by_uid[1].verified.round_id == 2
    assert by_uid[3].latest is None and by_uid[3].verified is None and by_uid[3].score is None
    assert by_uid[1].score == 1.5 and by_uid[1].weight == 0.7


def test_overview_reports_the_open_round_and_history(filled_store: Path) -> None:
    snap = overview(filled_store, now=NOW)
    assert snap.round is not None
    assert (snap.round.round_id, snap.round.tested, snap.round.passed, snap.round.miners) == (3, 1, 1, 3)
    assert snap.round.finished is None and snap.rounds_finished == 2
    assert [score for _, score in snap.score_history[1]] == [0.5, 1.5]
    assert [w for _, w in snap.weight_history[2]] == [0.3, 0.3]


def test_history_older_than_the_window_is_left_out(filled_store: Path) -> None:
    snap = overview(filled_store, days=1.0, now=NOW + 5 * 86_400)
    assert snap.score_history == {} and snap.weight_history == {}
    assert len(snap.miners) == 3  # the miners and their verdicts are still shown


def test_history_is_sampled_to_the_requested_points(tmp_path: Path) -> None:
    store = ValidatorStore(tmp_path / "v.db")
    store.sync_miners([(0, "hk")])
    from compute.store import ScoreUpdate

    for index in range(50):
        rnd = store.begin_round(block=index)
        store.finish_round(rnd.round_id, [ScoreUpdate(0, "hk", float(index))])
    store.close()
    series = overview(tmp_path / "v.db", points=10).score_history[0]
    assert len(series) == 10
    assert series[0][1] == 0.0 and series[-1][1] == 49.0  # first and newest kept


def test_overview_never_creates_or_writes_the_store(tmp_path: Path, filled_store: Path) -> None:
    with pytest.raises(StoreError):
        overview(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    before = filled_store.read_bytes()
    overview(filled_store)
    assert filled_store.read_bytes() == before
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(StoreError):
        overview(foreign)
