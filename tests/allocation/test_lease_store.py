"""LeaseStore: durable, atomic GPU reservations, public material only."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from compute.allocation import Endpoint, GpuConflict, LeaseRecord, LeaseStore, StoredLease


def lease(lease_id: str, gpus: tuple[int, ...]) -> StoredLease:
    record = LeaseRecord(
        lease_id, "5" + "C" * 47, "rental", gpus, 2, 2048, 10, 512, 1, "ssh-ed25519 AAAAkey", 1.0, 100.0
    )
    return StoredLease(record, "active", f'{{"gpu_count": {len(gpus)}}}')


def test_lease_survives_reopen_with_endpoint(tmp_path):
    store = LeaseStore(tmp_path / "l.db")
    store.reserve(lease("a" * 32, (0, 1)))
    endpoint = Endpoint("1.2.3.4", 40001, "lease", "ssh-ed25519 AAAAhost", {8888: 40002})
    store.set_endpoint("a" * 32, endpoint)
    store.close()
    again = LeaseStore(tmp_path / "l.db")
    assert again.get("a" * 32) == StoredLease(
        lease("a" * 32, (0, 1)).record, "active", '{"gpu_count": 2}', endpoint
    )
    assert again.held_gpus() == {0, 1}
    assert sqlite3.connect(tmp_path / "l.db").execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_overlapping_reservation_is_refused_and_ended_lease_frees_gpus(tmp_path):
    store = LeaseStore(tmp_path / "l.db")
    store.reserve(lease("a" * 32, (0,)))
    with pytest.raises(GpuConflict, match=r"\[0\]"):
        store.reserve(lease("b" * 32, (0, 1)))
    store.end("a" * 32, "released", 50.0)
    store.reserve(lease("b" * 32, (0, 1)))
    assert [s.lease_id for s in store.active()] == ["b" * 32]


def test_racing_threads_reserve_a_gpu_once(tmp_path):
    store = LeaseStore(tmp_path / "l.db")
    wins, barrier = [], threading.Barrier(8)

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            store.reserve(lease(f"{i:032x}", (3,)))
            wins.append(i)
        except GpuConflict:
            pass

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and store.held_gpus() == {3}


def test_store_holds_no_private_key_material(tmp_path):
    store = LeaseStore(tmp_path / "l.db")
    store.reserve(lease("a" * 32, ()))
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"PRIVATE KEY" not in raw


def test_version_1_table_gains_the_idempotency_column_and_keeps_rows(tmp_path):
    path = tmp_path / "l.db"
    store = LeaseStore(path)
    store.reserve(lease("a" * 32, (0,)))
    store.close()
    conn = sqlite3.connect(path)  # rebuild the table as version 1 wrote it
    conn.executescript(
        "CREATE TABLE old AS SELECT lease_id, owner_hotkey, purpose, gpus, cpu_count, memory_mb, disk_gb,"
        " shm_mb, extra_ports, ssh_public_key, created_at, expires_at, state, requirements, endpoint,"
        " ended_at FROM leases; DROP TABLE leases; ALTER TABLE old RENAME TO leases;"
    )
    conn.close()
    again = LeaseStore(path)
    assert again.get("a" * 32).state == "active"
    keyed = StoredLease(lease("b" * 32, (1,)).record, "pending", "{}", idempotency_key="k" * 10)
    again.reserve(keyed)
    assert again.by_key("5" + "C" * 47, "k" * 10) == keyed
    assert again.held_gpus() == {0, 1}  # a pending lease holds its GPUs
