"""Renter keys, pinned host keys, the ssh command and the lease book (no network)."""

from __future__ import annotations

import shlex
import sqlite3
import stat
from pathlib import Path

import asyncssh
import pytest
from operator_helpers import HOST_LINE
from operator_helpers import book_entry as _entry

from compute.operator import (
    BookError,
    KeyFileError,
    LeaseBook,
    generate_keypair,
    known_hosts_line,
    load_public_key,
    ssh_command,
    write_known_hosts,
)
from compute.operator.book import LinkRecord
from compute.operator.errors import Refused
from compute.operator.keys import remove_generated_key
from compute.protocol import SshAccess


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_generated_private_key_is_0600_in_a_0700_directory(tmp_path):
    key = generate_keypair(tmp_path / "keys")
    assert key.generated and key.private_path is not None
    assert _mode(key.private_path) == 0o600
    assert _mode(tmp_path / "keys") == 0o700
    loaded = asyncssh.read_private_key(str(key.private_path))
    assert loaded.export_public_key("openssh").decode().split()[:2] == key.public_line.split()[:2]


def test_removing_a_generated_key_deletes_both_halves(tmp_path):
    key = generate_keypair(tmp_path / "keys")
    remove_generated_key(key.private_path)
    assert list((tmp_path / "keys").iterdir()) == []


def test_renter_public_key_is_read_with_its_private_half_beside_it(tmp_path):
    private = asyncssh.generate_private_key("ssh-ed25519")
    (tmp_path / "id").write_bytes(private.export_private_key())
    (tmp_path / "id.pub").write_bytes(private.export_public_key())
    key = load_public_key(tmp_path / "id.pub")
    assert key.private_path == tmp_path / "id" and not key.generated
    assert key.public_line.startswith("ssh-ed25519 ")


@pytest.mark.parametrize(
    "content, message",
    [
        ("not a key", "not an OpenSSH public key"),
        ("ssh-ed25519 AAAA\nssh-ed25519 BBBB", "exactly one"),
        ("", "exactly one"),
    ],
)
def test_bad_public_key_files_are_usage_errors(tmp_path, content, message):
    path = tmp_path / "bad.pub"
    path.write_text(content)
    with pytest.raises(KeyFileError, match=message):
        load_public_key(path)


def test_private_key_passed_as_public_key_is_refused_without_echoing_it(tmp_path):
    path = tmp_path / "id"
    path.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    with pytest.raises(KeyFileError, match="is a private key") as info:
        load_public_key(path)
    assert "BEGIN" not in str(info.value)


def test_missing_public_key_file_is_a_usage_error(tmp_path):
    with pytest.raises(KeyFileError, match="cannot read"):
        load_public_key(tmp_path / "nope.pub")


def test_known_hosts_line_uses_bracket_syntax_for_non_default_ports():
    body = HOST_LINE.split()[1]
    assert known_hosts_line("10.0.0.5", 40022, HOST_LINE) == f"[10.0.0.5]:40022 ssh-ed25519 {body}"
    assert known_hosts_line("10.0.0.5", 22, HOST_LINE + " comment") == f"10.0.0.5 ssh-ed25519 {body}"


@pytest.mark.parametrize(
    "host, key", [("1.2.3.4", "ssh-ed25519 garbage"), ("a b", HOST_LINE), ("h,x", HOST_LINE)]
)
def test_invalid_host_or_host_key_from_a_miner_is_refused(host, key):
    with pytest.raises(Refused):
        known_hosts_line(host, 40022, key)


def test_ssh_command_pins_the_host_key_and_quotes_every_part(tmp_path):
    access = SshAccess(host="127.0.0.1", port=40100, username="lease", host_key=HOST_LINE)
    hosts = write_known_hosts(tmp_path / "dir with space", "a" * 32, access)
    command = ssh_command(access, hosts, tmp_path / "k ey")
    parts = shlex.split(command)
    assert parts == [
        "ssh",
        "-i",
        str(tmp_path / "k ey"),
        "-o",
        "IdentitiesOnly=yes",
        "-p",
        "40100",
        "-o",
        f"UserKnownHostsFile={hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "lease@127.0.0.1",
    ]
    assert hosts.read_text() == known_hosts_line("127.0.0.1", 40100, HOST_LINE) + "\n"


def test_book_round_trips_entries_and_lists_only_the_owners_active_leases(tmp_path):
    book = LeaseBook(tmp_path / "leases.db")
    mine, old, theirs = (
        _entry("a" * 32, created=2.0),
        _entry("b" * 32, state="released"),
        _entry("c" * 32, "5Other"),
    )
    for entry in (mine, old, theirs):
        book.save(entry)
    assert book.get("a" * 32) == mine
    assert book.entries("5Owner") == [mine]
    assert book.entries("5Owner", include_ended=True) == [mine, old]
    assert _mode(tmp_path / "leases.db") == 0o600
    assert book.get("d" * 32) is None


def test_a_book_kept_open_sees_other_processes_and_its_intents_are_on_disk_at_once(tmp_path):
    """The book keeps its connections open (a commit is ~0.8 ms, not ~2.5): another process's
    writes still show in a long-lived book's reads, an intent is on disk for a process started
    right after ``add_intent`` returns (a SIGKILL then leaves it to settle), and the WAL files
    take the book's 0600 mode."""
    import subprocess
    import sys

    from compute.operator.book import Intent

    path = tmp_path / "leases.db"
    book = LeaseBook(path)
    book.save(_entry("a" * 32))
    assert book.get("a" * 32) is not None  # this thread's reader is open from here on
    book.add_intent(Intent("k1", "5Owner", 3, "5Miner", "127.0.0.1:8091", "{}", None, False, 1.0))
    other = (
        "import sys; from compute.operator import LeaseBook\n"
        "from operator_helpers import book_entry\n"
        "book = LeaseBook(sys.argv[1])\n"
        "assert [i.idempotency_key for i in book.intents('5Owner')] == ['k1']\n"
        "book.save(book_entry('b' * 32)); book.drop_intent('k1')\n"
    )
    helpers = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", other, str(path)], check=True, env=_env_with(helpers), timeout=60)
    assert {e.lease_id for e in book.entries("5Owner")} == {"a" * 32, "b" * 32}
    assert book.intents("5Owner") == []
    for name in ("leases.db", "leases.db-wal", "leases.db-shm"):
        assert _mode(tmp_path / name) == 0o600, name


def _env_with(path: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (path, env.get("PYTHONPATH", "")) if p)
    return env


def test_book_stores_key_paths_but_no_private_key_material(tmp_path):
    key = generate_keypair(tmp_path / "keys")
    book = LeaseBook(tmp_path / "leases.db")
    book.save(_entry("a" * 32).with_changes(private_key_path=str(key.private_path)))
    secret = key.private_path.read_bytes()
    raw = b"".join(path.read_bytes() for path in tmp_path.glob("leases.db*"))
    assert str(key.private_path).encode() in raw
    assert b"PRIVATE KEY" not in raw and secret[40:80] not in raw


def test_a_file_that_is_not_a_book_is_refused_in_words(tmp_path):
    (tmp_path / "leases.db").write_bytes(b"not sqlite" * 100)
    with pytest.raises(BookError, match="cannot open lease book .*not a database"):
        LeaseBook(tmp_path / "leases.db")


def test_book_with_a_future_schema_is_refused(tmp_path):
    LeaseBook(tmp_path / "leases.db")
    with sqlite3.connect(tmp_path / "leases.db") as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(BookError, match="schema 99"):
        LeaseBook(tmp_path / "leases.db")


_SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE leases (
    lease_id TEXT PRIMARY KEY, owner_hotkey TEXT NOT NULL, network TEXT NOT NULL, netuid INTEGER NOT NULL,
    miner_uid INTEGER, miner_hotkey TEXT NOT NULL, endpoint TEXT NOT NULL, state TEXT NOT NULL,
    verified INTEGER NOT NULL, gpu_summary TEXT NOT NULL, requirements TEXT NOT NULL, ssh_host TEXT,
    ssh_port INTEGER, ssh_username TEXT, host_key TEXT, ports TEXT NOT NULL, known_hosts_path TEXT,
    private_key_path TEXT, public_key TEXT NOT NULL, key_generated INTEGER NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL, updated_at REAL NOT NULL
);
INSERT INTO leases VALUES ('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', '5Owner', 'sim:x', 27, 3, '5Miner', '127.0.0.1:8091',
    'active', 1, '1 x H100', '{}', NULL, NULL, NULL, NULL, '{}', NULL, NULL, '', 0, 1.0, 3601.0, 1.0);
"""


def test_a_book_of_the_earlier_schema_keeps_its_leases_and_gains_intents_and_prices(tmp_path):
    with sqlite3.connect(tmp_path / "leases.db") as conn:
        conn.executescript(_SCHEMA_1)
    book = LeaseBook(tmp_path / "leases.db")
    (kept,) = book.entries("5Owner")
    assert kept.lease_id == "a" * 32 and kept.price_per_hour is None and kept.spent(10.0) is None
    book.save(kept.with_changes(price_per_hour=3.6))
    assert book.get("a" * 32).spent(1801.0) == 1.8  # half an hour at 3.60 an hour
    assert book.intents("5Owner") == []
    with sqlite3.connect(tmp_path / "leases.db") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("3",)


def test_a_clusters_link_proofs_are_kept_and_the_latest_is_the_one_shown(tmp_path):
    with sqlite3.connect(tmp_path / "leases.db") as conn:
        conn.executescript(_SCHEMA_1)  # a book from before clusters: it gains their tables on opening
    book = LeaseBook(tmp_path / "leases.db")
    assert book.last_link("c1") is None
    passed = LinkRecord("c1", 100.0, True, 0.25, 0.3, 64 << 20, 0.5)
    failed = LinkRecord("c1", 200.0, False, 0.0, None, 64 << 20, 0.7, ("rank 1 (h:22): opening 3 wrong",))
    book.add_link(failed)
    book.add_link(passed)  # written later, taken earlier: order by the moment it was taken
    book.add_link(LinkRecord("c2", 300.0, True, 9.0, None, 1 << 20, 0.1))
    assert LeaseBook(tmp_path / "leases.db").last_link("c1") == failed


def test_spend_counts_from_the_start_to_now_or_to_the_end_of_the_lease():
    entry = _entry("a" * 32).with_changes(price_per_hour=2.0, created_at=0.0, expires_at=7200.0)
    assert entry.spent(1800.0) == 1.0
    assert entry.spent(99999.0) == 4.0  # never past its term
    assert entry.with_changes(state="released", updated_at=3600.0).spent(99999.0) == 2.0
