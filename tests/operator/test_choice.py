"""Machine filtering and choice, durations, lease ids and verified-GPU records (pure or local)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from operator_helpers import book_entry as _entry

from compute.operator import (
    LeaseBook,
    Machine,
    UsageError,
    Wanted,
    load_verified,
    matches,
    model_matches,
    rank,
)
from compute.operator.commands import parse_duration, resolve_lease_id
from compute.operator.errors import LeaseNotFound
from compute.store import PogResult, ValidatorStore

BASE = Machine(
    uid=1,
    hotkey="5A",
    endpoint="127.0.0.1:1",
    online=True,
    error=None,
    verified=True,
    gpu_model="NVIDIA H100 80GB HBM3",
    gpu_count=2,
    gpu_memory_gb=79.6,
    cpu=32,
    ram_gb=256.0,
    disk_gb=900.0,
    available=True,
    free_gpus=2,
    active_leases=0,
    max_duration_s=86400,
    backend="docker",
    version="1.0.0",
)


@pytest.mark.parametrize(
    "wanted, actual, expected",
    [
        ("H100", "NVIDIA H100 80GB HBM3", True),
        ("h100 80gb", "NVIDIA H100 80GB HBM3", True),
        ("RTX 4090", "NVIDIA GeForce RTX 4090", True),
        ("rtx-4090", "NVIDIA GeForce RTX 4090", True),
        ("H10", "NVIDIA H100 80GB HBM3", False),
        ("A100", "NVIDIA H100 80GB HBM3", False),
        ("H100", None, False),
    ],
)
def test_gpu_model_matching_is_by_whole_words(wanted, actual, expected):
    assert model_matches(wanted, actual) is expected


@pytest.mark.parametrize(
    "wanted, expected",
    [
        (Wanted(), True),
        (Wanted(gpu_model="h100", gpu_count=2, gpu_memory_gb=79, cpu=32, ram_gb=256, disk_gb=900), True),
        (Wanted(gpu_count=3), False),
        (Wanted(gpu_memory_gb=80), False),
        (Wanted(cpu=33), False),
        (Wanted(ram_gb=257), False),
        (Wanted(disk_gb=901), False),
        (Wanted(gpu_model="A100"), False),
    ],
)
def test_requirements_filter_machines(wanted, expected):
    assert matches(BASE, wanted) is expected


@pytest.mark.parametrize(
    "changes, state",
    [
        ({}, "free"),
        ({"free_gpus": 1}, "partly rented"),
        ({"free_gpus": 0}, "rented"),
        ({"available": False}, "rented"),
        ({"online": False}, "offline"),
        ({"gpu_count": 0, "active_leases": 1}, "partly rented"),
    ],
)
def test_machine_state_follows_free_gpus_and_availability(changes, state):
    assert replace(BASE, **changes).state == state


def test_available_only_hides_rented_and_offline_machines():
    wanted = Wanted(available_only=True)
    assert matches(BASE, wanted)
    assert not matches(replace(BASE, free_gpus=0), wanted)
    assert not matches(replace(BASE, online=False), wanted)


def test_choice_prefers_verified_then_the_smallest_fit_then_uid():
    big = replace(BASE, uid=2, gpu_count=8, free_gpus=8)
    unverified_exact = replace(BASE, uid=3, verified=False, gpu_count=2)
    exact = replace(BASE, uid=4, gpu_count=2)
    exact_low_uid = replace(BASE, uid=1, gpu_count=2)
    busy = replace(BASE, uid=5, available=False)
    offline = replace(BASE, uid=6, online=False)
    ranked = rank([big, unverified_exact, exact, busy, offline, exact_low_uid], Wanted(gpu_count=2))
    assert [m.uid for m in ranked] == [1, 4, 2, 3]


def test_nothing_matching_ranks_empty():
    assert rank([BASE], Wanted(gpu_model="B200")) == []


@pytest.mark.parametrize(
    "hours, duration, seconds",
    [
        (None, None, 3600),
        (2.0, None, 7200),
        (None, "90m", 5400),
        (None, "3d", 259200),
        (None, "600", 600),
        (None, "1.5h", 5400),
        (None, "2W", 1209600),
    ],
)
def test_durations_parse_to_seconds(hours, duration, seconds):
    assert parse_duration(hours, duration) == seconds


@pytest.mark.parametrize(
    "hours, duration, message",
    [
        (1.0, "1h", "not both"),
        (None, "soon", "expected a number"),
        (None, "10s", "between"),
        (None, "91d", "between"),
        (-1.0, None, "between"),
    ],
)
def test_bad_durations_are_usage_errors(hours, duration, message):
    with pytest.raises(UsageError, match=message):
        parse_duration(hours, duration)


def test_extend_needs_an_explicit_duration():
    with pytest.raises(UsageError, match="how long"):
        parse_duration(None, None, default_s=None)


def test_lease_ids_resolve_from_a_unique_prefix_of_my_leases(tmp_path):
    book = LeaseBook(tmp_path / "leases.db")
    book.save(_entry("abcd1" + "0" * 27))
    book.save(_entry("abcd2" + "0" * 27))
    book.save(_entry("ffff" + "0" * 28, owner="5Other"))
    assert resolve_lease_id(book, "5Owner", "ABCD1") == "abcd1" + "0" * 27
    assert resolve_lease_id(book, "5Owner", "1" * 32) == "1" * 32
    with pytest.raises(UsageError, match="matches 2"):
        resolve_lease_id(book, "5Owner", "abcd")
    with pytest.raises(LeaseNotFound):
        resolve_lease_id(book, "5Owner", "ffff")
    with pytest.raises(UsageError, match="not a lease id"):
        resolve_lease_id(book, "5Owner", "../etc")


def _result(round_id: int, uid: int, hotkey: str, ok: bool, models: tuple[str, ...], rented: bool = False):
    return PogResult(
        round_id=round_id,
        uid=uid,
        hotkey=hotkey,
        ok=ok,
        sample=1.0 if ok else 0.0,
        models=models,
        gpu_count=len(models),
        rented=rented,
        created=100.0 + round_id,
    )


def test_verified_gpus_come_from_the_latest_passing_unrented_pog_result(tmp_path):
    store = ValidatorStore(tmp_path / "validator" / "state.db")
    first = store.begin_round(10).round_id
    store.record_result(_result(first, 1, "5A", True, ("NVIDIA A100 80GB",)))
    store.record_result(_result(first, 2, "5B", True, ("NVIDIA H100", "NVIDIA H100")))
    store.finish_round(first, [])
    second = store.begin_round(20).round_id
    store.record_result(_result(second, 1, "5A", True, ("NVIDIA H100", "NVIDIA H100", "NVIDIA H100")))
    store.record_result(_result(second, 2, "5B", False, ("NVIDIA RTX 4090",)))
    store.record_result(_result(second, 3, "5C", True, ("NVIDIA B200",), rented=True))
    store.close()
    verified = load_verified(tmp_path / "validator")  # the data dir works as well as the file
    assert {k: (v.gpu_model, v.gpu_count) for k, v in verified.items()} == {
        "5A": ("NVIDIA H100", 3),
        "5B": ("NVIDIA H100", 2),
    }


def test_a_missing_pog_database_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        load_verified(tmp_path / "nope.db")
    with pytest.raises(UsageError, match="no validator database"):
        load_verified(tmp_path)
