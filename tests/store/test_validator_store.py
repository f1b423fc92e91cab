"""ValidatorStore behaviour: rounds, results, scores, hotkey changes, weights log, schema guard."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from compute.store import (
    SCHEMA_VERSION,
    PogResult,
    RoundAlreadyFinished,
    RoundRecord,
    SchemaMismatch,
    ScoreRecord,
    ScoreUpdate,
    StoreError,
    ValidatorStore,
    WeightsRecord,
    verified_machines,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


@pytest.fixture
def store(tmp_path: Path):
    s = ValidatorStore(tmp_path / "state" / "validator.db", clock=Clock())
    yield s
    s.close()


def test_open_round_is_resumed_until_finished(store: ValidatorStore) -> None:
    first = store.begin_round(block=10)
    assert store.begin_round(block=20) == first
    store.finish_round(first.round_id, [])
    second = store.begin_round(block=30)
    assert second.round_id == first.round_id + 1 and second.block == 30
    assert store.round(first.round_id).finished is not None
    assert store.rounds_finished() == 1


def test_result_round_trips_and_duplicates_are_ignored(store: ValidatorStore) -> None:
    rnd = store.begin_round(block=5)
    result = PogResult(
        rnd.round_id,
        3,
        "hk",
        ok=True,
        sample=2.5,
        reasons=(),
        models=("H100", "H100"),
        tflops_fp16=700.0,
        tflops_fp32=50.0,
        gpu_count=2,
        timings={"fp16": 1.5},
        block=5,
        created=7.0,
    )
    assert store.record_result(result) is True
    assert store.record_result(PogResult(rnd.round_id, 3, "hk", ok=False, sample=0.0)) is False
    assert store.results(rnd.round_id) == [result]
    assert store.tested_uids(rnd.round_id) == {3}


def test_finishing_a_round_twice_applies_its_updates_once(store: ValidatorStore) -> None:
    rnd = store.begin_round(block=1)
    assert store.finish_round(rnd.round_id, [ScoreUpdate(1, "hk", 4.0)]) == 1
    with pytest.raises(RoundAlreadyFinished):
        store.finish_round(rnd.round_id, [ScoreUpdate(1, "hk", 99.0)])
    assert store.scores()[1].score == 4.0


def test_failed_round_close_changes_nothing(store: ValidatorStore) -> None:
    rnd = store.begin_round(block=1)
    with pytest.raises(StoreError):
        store.finish_round(rnd.round_id, [ScoreUpdate(1, "hk", 4.0), ScoreUpdate(2, "hk2", float("nan"))])
    assert store.scores() == {}
    assert store.round(rnd.round_id).finished is None


def test_new_hotkey_on_a_uid_starts_from_zero(store: ValidatorStore) -> None:
    store.sync_miners([(1, "old"), (2, "b")])
    rnd = store.begin_round(block=1)
    store.finish_round(rnd.round_id, [ScoreUpdate(1, "old", 3.0), ScoreUpdate(2, "b", 1.0)])
    assert store.sync_miners([(1, "new"), (2, "b")]) == [1]
    assert set(store.scores()) == {2}
    assert store.miners() == {1: "new", 2: "b"}


def test_last_verified_skips_failures_and_rented_checks(store: ValidatorStore) -> None:
    r1 = store.begin_round(block=1)
    store.record_result(PogResult(r1.round_id, 1, "hk", ok=True, sample=5.0, models=("A100",), gpu_count=1))
    store.finish_round(r1.round_id, [])
    r2 = store.begin_round(block=2)
    store.record_result(PogResult(r2.round_id, 1, "hk", ok=True, sample=6.0, rented=True))
    store.finish_round(r2.round_id, [])
    r3 = store.begin_round(block=3)
    store.record_result(PogResult(r3.round_id, 1, "hk", ok=False, sample=0.0, reasons=("timeout",)))
    last = store.last_verified(1, "hk")
    assert last is not None and last.round_id == r1.round_id and last.models == ("A100",)
    assert store.last_verified(1, "other") is None


def test_failures_since_reads_failed_tests_after_a_moment(store: ValidatorStore) -> None:
    rnd = store.begin_round(block=1)
    store.record_result(PogResult(rnd.round_id, 1, "hk", ok=False, sample=0.0, reasons=("a",), created=10.0))
    store.record_result(PogResult(rnd.round_id, 2, "hk2", ok=False, sample=0.0, reasons=("b",), created=20.0))
    store.record_result(PogResult(rnd.round_id, 3, "hk3", ok=True, sample=1.0, created=30.0))
    store.record_result(PogResult(rnd.round_id, 4, "hk4", ok=False, sample=0.0, rented=True, created=40.0))
    assert [r.uid for r in store.failures_since(0.0)] == [1, 2]
    assert [r.reasons for r in store.failures_since(10.0)] == [("b",)]
    assert [r.uid for r in store.failures_since(0.0, "hk")] == [1]
    assert store.failures_since(20.0) == []


def test_weights_log_keeps_failures_apart(store: ValidatorStore) -> None:
    store.log_weights(10, {1: 0.25, 2: 0.75}, 1000, ok=True)
    store.log_weights(20, {1: 1.0}, 1000, ok=False, error="RateLimited")
    last_ok = store.last_weights()
    assert last_ok == WeightsRecord(10, {1: 0.25, 2: 0.75}, 1000, True, None, last_ok.created)
    assert store.last_weights(ok_only=False).error == "RateLimited"


def test_scores_are_records(store: ValidatorStore) -> None:
    rnd = store.begin_round(block=1)
    store.finish_round(rnd.round_id, [ScoreUpdate(4, "hk", 1.5)])
    rec = store.scores()[4]
    assert rec == ScoreRecord(4, "hk", 1.5, rec.updated)
    assert isinstance(store.round(rnd.round_id), RoundRecord)


def test_database_from_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    ValidatorStore(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(SchemaMismatch):
        ValidatorStore(path)


def test_verified_machines_reads_latest_passing_unrented_result_per_hotkey_while_store_is_open(
    store: ValidatorStore,
) -> None:
    r1 = store.begin_round(block=1)
    store.record_result(PogResult(r1.round_id, 1, "hkA", ok=True, sample=5.0, models=("A100",), gpu_count=1))
    store.record_result(PogResult(r1.round_id, 2, "hkB", ok=True, sample=5.0, models=("H100",), gpu_count=1))
    store.finish_round(r1.round_id, [])
    r2 = store.begin_round(block=2)
    store.record_result(
        PogResult(r2.round_id, 1, "hkA", ok=True, sample=7.0, models=("H100",) * 2, gpu_count=2)
    )
    store.record_result(PogResult(r2.round_id, 2, "hkB", ok=False, sample=0.0, reasons=("timeout",)))
    store.record_result(PogResult(r2.round_id, 3, "hkC", ok=True, sample=1.0, rented=True))
    writer = sqlite3.connect(store.path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a validator mid-write neither blocks nor is blocked by the reader
    try:
        machines = verified_machines(store.path)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert {hk: (r.round_id, r.models) for hk, r in machines.items()} == {
        "hkA": (r2.round_id, ("H100", "H100")),
        "hkB": (r1.round_id, ("H100",)),
    }


def test_verified_machines_refuses_missing_foreign_and_other_schema_files(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        verified_machines(tmp_path / "nope.db")
    assert not (tmp_path / "nope.db").exists()
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as con:
        con.execute("CREATE TABLE t (x)")
    con.close()
    with pytest.raises(StoreError, match="cannot read"):
        verified_machines(foreign)
    other = tmp_path / "v.db"
    ValidatorStore(other).close()
    con = sqlite3.connect(other)
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with pytest.raises(SchemaMismatch):
        verified_machines(other)


_V1_RESULTS = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE rounds (round_id INTEGER PRIMARY KEY AUTOINCREMENT, block INTEGER NOT NULL, started REAL NOT NULL,
    finished REAL);
CREATE TABLE pog_results (round_id INTEGER NOT NULL REFERENCES rounds(round_id), uid INTEGER NOT NULL,
    hotkey TEXT NOT NULL, ok INTEGER NOT NULL, sample REAL NOT NULL, rented INTEGER NOT NULL DEFAULT 0,
    reasons TEXT NOT NULL, models TEXT NOT NULL, tflops_fp16 REAL, tflops_fp32 REAL, gpu_count INTEGER NOT NULL,
    timings TEXT NOT NULL, block INTEGER NOT NULL, created REAL NOT NULL, PRIMARY KEY (round_id, uid));
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO rounds (block, started, finished) VALUES (3, 1.0, 2.0);
INSERT INTO pog_results VALUES (1, 4, 'hkOld', 1, 3.3, 0, '[]', '["H100 SXM"]', 700.0, 50.0, 1, '{}', 3, 1.5);
"""


def test_schema_1_file_is_migrated_in_place_and_old_rows_read_without_depth_figures(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as con:
        con.executescript(_V1_RESULTS)
    con.close()
    store = ValidatorStore(path)
    old = store.last_verified(4, "hkOld")
    assert old is not None and old.models == ("H100 SXM",) and old.sample == 3.3
    assert old.mem_gbs is None and old.sustained_factor is None and old.host == {} and old.gpu_uuids == ()
    assert store.gpu_uuids(4, "hkOld") is None
    store.close()
    assert set(verified_machines(path)) == {"hkOld"}  # the read-only view reads the migrated file
    again = ValidatorStore(path)  # a second open is a no-op
    assert again.last_verified(4, "hkOld") == old
    again.close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
        SCHEMA_VERSION
    )
    con.close()


def test_depth_figures_and_gpu_uuids_round_trip(store: ValidatorStore) -> None:
    rnd = store.begin_round(block=1)
    result = PogResult(
        rnd.round_id,
        5,
        "hk",
        ok=True,
        sample=6.1,
        models=("H100 SXM",) * 2,
        gpu_count=2,
        mem_gbs=2900.0,
        mem_proven_gb=48.1,
        sustained_ratio=0.82,
        sustained_factor=0.911,
        scaling_efficiency=0.97,
        credited_gpus=2,
        host={"cpu_cores": 32.0, "ram_gb": 0.5},
        gpu_uuids=("GPU-a", "GPU-b"),
        depth_round=rnd.round_id,
        history_reset=True,
        created=1.0,
    )
    assert store.record_result(result)
    assert store.results(rnd.round_id) == [result]
    assert store.last_verified(5, "hk") == result
    assert store.gpu_uuids(5, "hk") == ("GPU-a", "GPU-b")
    assert verified_machines(store.path)["hk"] == result
